#!/usr/bin/env bash
# Run MQSim (CMU-SAFARI; a checkout built by the user, none of its code is in this repository) as a peer of iolearn's SSD simulator on the same block
# trace and drive configuration.
#
#   peer-mqsim.sh TRACE N SSD.toml [OUTDIR]
#
# TRACE   a trace iolearn reads: the 5-column LinnOS/Heimdall text of shared/reference/traces
#         (`arrival_ms device offset_bytes size_bytes op`, op 1 = read, 0 = write), MSR-Cambridge
#         CSV, blkparse or iolearn binary. It is normalised with `iolearn trace convert` (so
#         arrivals are what our reader makes of them), or read directly if it is 5-column text
#         and no iolearn binary is found.
# N       replay count: the trace is written N times back to back; copy k's arrivals (relative
#         to the trace's first) are shifted by k * (span + gap), span = last - first arrival in ns,
#         gap = span / (I/Os - 1) (integer ns; 1 ms for a 1-I/O trace): each copy starts one mean
#         inter-arrival after the last, exactly as `iolearn sim ssd --repeat N` plays it
#         (crates/tail/src/replay_file.rs, Passes).
# SSD.toml an iolearn SsdConfig file (crates/flash/src/ssd.rs; every field required).
# OUTDIR  where the generated files go (default: ./mqsim-run-<trace>-x<N>-<toml>).
#
# Writes OUTDIR/trace.mqsim (MQSim's ASCII trace: `arrival_ns device start_sector
# size_sectors type`, type 0 = write, 1 = read; src/host/ASCII_Trace_Definition.h,
# src/host/IO_Flow_Trace_Based.cpp), OUTDIR/ssdconfig.xml (with the mapping and mismatches
# as comments), OUTDIR/workload.xml (one trace flow, no preconditioning), runs MQSim under
# /usr/bin/time -v, and prints wall seconds, peak RSS, I/O counts and latencies.
# Our side of the comparison, same arrivals:
#   iolearn sim ssd --trace TRACE --repeat N --preset SSD.toml --replicas 1 --precondition 0 --mode base
#
# Environment:
#   MQSIM_BIN        MQSim binary (default $MQSIM_DIR/MQSim, MQSIM_DIR default /var/tmp/mqsim):
#                    commit 7ec40e3 with benches/peers/mqsim-percentiles.patch applied (per-type
#                    means and percentiles in its output; `git apply` it in the checkout, then
#                    `make -j2`); an unpatched build reports only the overall mean/min/max
#   MQSIM_POLICIES   iolearn (default): MQSim's policy knobs set to what iolearn's base drive does
#                    (ideal mapping table, greedy GC, no copyback, no wear levelling, no command
#                    suspension); stock: MQSim's shipped ssdconfig.xml values for those knobs
#                    (2 MiB cached mapping table with flash reads on misses, RGA GC, dynamic and
#                    static wear levelling, erase suspension). Geometry and timing follow the TOML
#                    in both.
#   REQUEST_LOG=1    also write OUTDIR/requests.log, one line per request (patched binary only):
#                    arrival_ns type(1 read) start_lba size_sectors device_response_ns e2e_ns
#   IOLEARN          iolearn binary for trace normalisation (default: this checkout's
#                    target/release/iolearn)
#   LINNOS=1         also write OUTDIR/trace.linnos, the N copies in our 5-column text (arrivals
#                    rounded to the microsecond, as that format holds them)
set -euo pipefail

usage="usage: $0 TRACE N SSD.toml [OUTDIR]"
trace=${1:?$usage}
repeat=${2:?$usage}
toml=${3:?$usage}
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "$0: N must be a positive integer, got '$repeat'" >&2; exit 2; }
[[ -f $trace ]] || { echo "$0: no trace file $trace" >&2; exit 2; }
[[ -f $toml ]] || { echo "$0: no TOML file $toml" >&2; exit 2; }
here=${MQSIM_DIR:-/var/tmp/mqsim}
mqsim=${MQSIM_BIN:-$here/MQSim}
policies=${MQSIM_POLICIES:-iolearn}
iolearn=${IOLEARN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/release/iolearn}
[[ -x $mqsim ]] || { echo "$0: no MQSim binary at $mqsim (build: cd $here && make -j2)" >&2; exit 2; }
[[ $policies == iolearn || $policies == stock ]] || { echo "$0: MQSIM_POLICIES must be iolearn or stock" >&2; exit 2; }
out=${4:-./mqsim-run-$(basename "${trace%.*}")-x$repeat-$(basename "${toml%.toml}")}
mkdir -p "$out"
out=$(cd "$out" && pwd)
trace=$(realpath "$trace")
toml=$(realpath "$toml")

# 1. The trace, normalised to the 5-column text by our own reader.
if [[ -x $iolearn ]]; then
  "$iolearn" trace convert "$trace" --to linnos -o "$out/base.linnos" >/dev/null
else
  echo "peer-mqsim: no iolearn binary at $iolearn; reading $trace as 5-column text" >&2
  cp "$trace" "$out/base.linnos"
fi

# 2. MQSim's trace (N copies) and the same copies in our format.
rm -f "$out/trace.linnos"
python3 - "$out/base.linnos" "$repeat" "$out/trace.mqsim" "${LINNOS:-0}" "$out/trace.linnos" <<'PY'
import sys
src, n, mq_path, want_ln, ln_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1", sys.argv[5]
rows = []
for line in open(src):
    f = line.split()
    if not f or f[0].startswith('#'):
        continue
    ms, dev, off, size, op = f
    ns = round(float(ms) * 1e6)
    off, size, op = int(off), int(size), int(op)
    assert op in (0, 1) and size > 0, line
    rows.append((ns, dev, off, size, op))
if not rows:
    sys.exit("peer-mqsim: empty trace")
if any(rows[i][0] > rows[i + 1][0] for i in range(len(rows) - 1)):
    print("peer-mqsim: arrivals not in order; sorted (stable) as MQSim requires", file=sys.stderr)
    rows.sort(key=lambda r: r[0])
t0 = rows[0][0]
span = rows[-1][0] - t0
gap = span // (len(rows) - 1) if len(rows) > 1 else 1_000_000
period = span + max(gap, 1)
mq_tail, ln_tail, base = [], [], []
for ns, dev, off, size, op in rows:
    lba = off // 512
    sectors = -(-(off + size) // 512) - lba  # MQSim works in 512-byte sectors
    base.append(ns - t0)
    mq_tail.append(f" 0 {lba} {sectors} {op}\n")  # MQSim type: 0 write, 1 read (same as ours)
    ln_tail.append(f" {dev} {off} {size} {op}\n")
with open(mq_path, 'w', buffering=1 << 22) as mq:
    for k in range(n):
        shift = k * period
        mq.writelines(f"{t + shift}{a}" for t, a in zip(base, mq_tail))
if want_ln:
    with open(ln_path, 'w', buffering=1 << 22) as ln:
        for k in range(n):
            shift = k * period
            for t, b in zip(base, ln_tail):
                us = (t + shift + 500) // 1000
                ln.write(f"{us // 1000}.{us % 1000:03d}{b}")
print(f"peer-mqsim: {len(rows)} I/Os x {n} = {len(rows) * n}; copy period {period / 1e9:.9f} s "
      f"(span {span / 1e9:.6f} s + mean gap {gap / 1e6:.6f} ms)", file=sys.stderr)
PY

# 3. The SSD configuration and the workload.
python3 - "$toml" "$out/ssdconfig.xml" "$out/workload.xml" "$out/trace.mqsim" "$policies" <<'PY'
import sys, tomllib, math
toml_path, cfg_path, wl_path, trace_path, policies = sys.argv[1:]
c = tomllib.load(open(toml_path, 'rb'))
need = ["name", "channels", "chips_per_channel", "dies_per_chip", "planes_per_die", "blocks_per_plane",
        "pages_per_block", "page_bytes", "over_provisioning", "gc_threshold_blocks", "read_ns",
        "program_lower_ns", "program_upper_ns", "erase_ns", "channel_bytes_per_s", "controller_ns",
        "buffer_pages", "flush_interval_ns", "parity_group"]
missing = [k for k in need if k not in c]
if missing:
    sys.exit(f"peer-mqsim: {toml_path} lacks {', '.join(missing)}")
if c["page_bytes"] % 512 or c["page_bytes"] > 32768:
    sys.exit("peer-mqsim: MQSim pages are whole 512-byte sectors, at most 64 of them (a 64-bit sector "
             f"bitmap, page_status_type): page_bytes {c['page_bytes']} cannot be simulated")
planes = c["channels"] * c["chips_per_channel"] * c["dies_per_chip"] * c["planes_per_die"]
physical = planes * c["blocks_per_plane"] * c["pages_per_block"]
# iolearn's logical capacity (SsdConfig::logical_pages): physical / (1 + op), but never less spare
# than the GC reserve plus two blocks per plane. MQSim's: physical * (1 - Overprovisioning_Ratio).
by_op = int(physical / (1.0 + c["over_provisioning"]))
reserve = (c["gc_threshold_blocks"] + 2) * c["pages_per_block"] * planes
logical = min(by_op, physical - reserve)
mq_op = 1.0 - (logical + 0.5) / physical  # MQSim truncates physical * (1 - ratio): + 0.5 lands on logical
if logical >= 2**32:
    sys.exit(f"peer-mqsim: {logical} logical pages; MQSim counts them in an unsigned int")
# GC: MQSim collects a plane when its free blocks < (unsigned)(GC_Exec_Threshold * blocks), raised to
# at least 10 (max_ongoing_gc_reqs_per_plane, hard-coded in SSD_Device.cpp).
gc_ratio = (c["gc_threshold_blocks"] + 0.5) / c["blocks_per_plane"]
gc_eff = max(int(gc_ratio * c["blocks_per_plane"]), 1, 10)
# Channel: MQSim's NVDDR2 channel moves Flash_Channel_Width bytes every floor(1000 / rate) ns
# (SSD_Device.cpp truncates 1000 / Channel_Transfer_Rate to whole ns); pick width and rate closest
# to channel_bytes_per_s.
best = None
for w in (1, 2, 4, 8, 16):
    for r in range(1000, 0, -1):  # ties: the narrowest channel, the highest rate
        k = 1000 // r
        bps = w * 1e9 / k
        err = abs(bps - c["channel_bytes_per_s"]) / c["channel_bytes_per_s"]
        if best is None or err < best[0] - 1e-12:
            best = (err, w, r, bps)
_, ch_w, ch_rate, ch_bps = best
cache_bytes = c["buffer_pages"] * c["page_bytes"]
if cache_bytes >= 2**32:
    sys.exit("peer-mqsim: buffer_pages * page_bytes must be below 4 GiB (MQSim's unsigned int)")
tech = "MLC"  # MQSim MLC: even pages LSB, odd MSB, as iolearn's lower/upper pages
iol = policies == "iolearn"
notes = f"""
  Generated by peer-mqsim.sh from {toml_path} ({c['name']}); MQSIM_POLICIES={policies}.
  Matched: channels, chips_per_channel, dies_per_chip, planes_per_die, blocks_per_plane,
    pages_per_block, page_bytes; read_ns -> Page_Read_Latency_*; program_lower_ns -> LSB,
    program_upper_ns -> MSB (and CSB, unused by MLC): MQSim MLC programs even pages as LSB, odd as
    MSB, as iolearn; erase_ns -> Block_Erase_Latency.
  over_provisioning {c['over_provisioning']}: iolearn exposes {logical} of {physical} pages
    (physical / (1 + op), capped by the GC reserve); MQSim exposes physical * (1 - ratio), so
    Overprovisioning_Ratio = {mq_op:.12f} gives the same logical capacity.
  gc_threshold_blocks {c['gc_threshold_blocks']}: GC_Exec_Threshold = (blocks + 0.5) / blocks_per_plane;
    MQSim collects when free blocks < {gc_eff}{' (MQSim raises any threshold below 10 blocks to 10: MISMATCH)' if gc_eff != c['gc_threshold_blocks'] else ''}.
  channel_bytes_per_s {c['channel_bytes_per_s']}: width {ch_w} B x {ch_rate} MT/s -> {ch_bps:.0f} B/s in MQSim
    ({(ch_bps / c['channel_bytes_per_s'] - 1) * 100:+.2f}%; MQSim truncates 1000/rate to whole ns). MQSim also
    spends command/address cycles on the channel; iolearn moves a whole page per read, MQSim the
    sectors asked for.
  buffer_pages {c['buffer_pages']} -> Data_Cache_Capacity {cache_bytes} bytes, WRITE_CACHE. MISMATCH in kind:
    MQSim acknowledges writes from DRAM, writes back first-touch ("cold") pages at once and the rest
    on LRU eviction; iolearn flushes the whole buffer when full or every flush_interval_ns.
  NOT MATCHED (no MQSim field): controller_ns {c['controller_ns']} (MQSim models NVMe queues, PCIe
    transfers over 4 x 1 GB/s lanes and DRAM timing instead), flush_interval_ns {c['flush_interval_ns']},
    parity_group {c['parity_group']} (no RAIN in MQSim), name.
  Other differences: MQSim allocates pages statically by address (CWDP), iolearn round-robin over
    planes; MQSim reads of never-written pages go to flash (online_create_entry_for_reads), iolearn
    answers them in 2 us without flash; MQSim schedules out of order (Sprinkler), iolearn in arrival
    order per plane.
  Policies ({policies}): Ideal_Mapping_Table {'true (iolearn keeps the whole map in DRAM)' if iol else 'false, CMT 2 MiB (stock)'},
    GC {'GREEDY' if iol else 'RGA (stock)'}, copyback off and GC not preemptible (iolearn base), wear levelling
    {'off (iolearn has none)' if iol else 'on (stock)'}, command suspension {'NONE (iolearn base)' if iol else 'ERASE (stock)'}.
  Preconditioning off: the drive starts empty, as iolearn's.
"""
cfg = f"""<?xml version="1.0" encoding="us-ascii"?>
<!--{notes}-->
<Execution_Parameter_Set>
	<Host_Parameter_Set>
		<PCIe_Lane_Bandwidth>1.00000</PCIe_Lane_Bandwidth>
		<PCIe_Lane_Count>4</PCIe_Lane_Count>
		<SATA_Processing_Delay>400000</SATA_Processing_Delay>
		<Enable_ResponseTime_Logging>false</Enable_ResponseTime_Logging>
		<ResponseTime_Logging_Period_Length>1000000</ResponseTime_Logging_Period_Length>
	</Host_Parameter_Set>
	<Device_Parameter_Set>
		<Seed>321</Seed>
		<Enabled_Preconditioning>false</Enabled_Preconditioning>
		<Memory_Type>FLASH</Memory_Type>
		<HostInterface_Type>NVME</HostInterface_Type>
		<IO_Queue_Depth>65535</IO_Queue_Depth>
		<Queue_Fetch_Size>512</Queue_Fetch_Size>
		<Caching_Mechanism>ADVANCED</Caching_Mechanism>
		<Data_Cache_Sharing_Mode>SHARED</Data_Cache_Sharing_Mode>
		<Data_Cache_Capacity>{cache_bytes}</Data_Cache_Capacity>
		<Data_Cache_DRAM_Row_Size>8192</Data_Cache_DRAM_Row_Size>
		<Data_Cache_DRAM_Data_Rate>100</Data_Cache_DRAM_Data_Rate>
		<Data_Cache_DRAM_Data_Busrt_Size>1</Data_Cache_DRAM_Data_Busrt_Size>
		<Data_Cache_DRAM_tRCD>13</Data_Cache_DRAM_tRCD>
		<Data_Cache_DRAM_tCL>13</Data_Cache_DRAM_tCL>
		<Data_Cache_DRAM_tRP>13</Data_Cache_DRAM_tRP>
		<Address_Mapping>PAGE_LEVEL</Address_Mapping>
		<Ideal_Mapping_Table>{'true' if iol else 'false'}</Ideal_Mapping_Table>
		<CMT_Capacity>2097152</CMT_Capacity>
		<CMT_Sharing_Mode>SHARED</CMT_Sharing_Mode>
		<Plane_Allocation_Scheme>CWDP</Plane_Allocation_Scheme>
		<Transaction_Scheduling_Policy>PRIORITY_OUT_OF_ORDER</Transaction_Scheduling_Policy>
		<Overprovisioning_Ratio>{mq_op:.12f}</Overprovisioning_Ratio>
		<GC_Exec_Threshold>{gc_ratio:.9f}</GC_Exec_Threshold>
		<GC_Block_Selection_Policy>{'GREEDY' if iol else 'RGA'}</GC_Block_Selection_Policy>
		<Use_Copyback_for_GC>false</Use_Copyback_for_GC>
		<Preemptible_GC_Enabled>false</Preemptible_GC_Enabled>
		<GC_Hard_Threshold>{gc_ratio / 10:.9f}</GC_Hard_Threshold>
		<Dynamic_Wearleveling_Enabled>{'false' if iol else 'true'}</Dynamic_Wearleveling_Enabled>
		<Static_Wearleveling_Enabled>{'false' if iol else 'true'}</Static_Wearleveling_Enabled>
		<Static_Wearleveling_Threshold>100</Static_Wearleveling_Threshold>
		<Preferred_suspend_erase_time_for_read>700000</Preferred_suspend_erase_time_for_read>
		<Preferred_suspend_erase_time_for_write>700000</Preferred_suspend_erase_time_for_write>
		<Preferred_suspend_write_time_for_read>100000</Preferred_suspend_write_time_for_read>
		<Flash_Channel_Count>{c['channels']}</Flash_Channel_Count>
		<Flash_Channel_Width>{ch_w}</Flash_Channel_Width>
		<Channel_Transfer_Rate>{ch_rate}</Channel_Transfer_Rate>
		<Chip_No_Per_Channel>{c['chips_per_channel']}</Chip_No_Per_Channel>
		<Flash_Comm_Protocol>NVDDR2</Flash_Comm_Protocol>
		<Flash_Parameter_Set>
			<Flash_Technology>{tech}</Flash_Technology>
			<CMD_Suspension_Support>{'NONE' if iol else 'ERASE'}</CMD_Suspension_Support>
			<Page_Read_Latency_LSB>{c['read_ns']}</Page_Read_Latency_LSB>
			<Page_Read_Latency_CSB>{c['read_ns']}</Page_Read_Latency_CSB>
			<Page_Read_Latency_MSB>{c['read_ns']}</Page_Read_Latency_MSB>
			<Page_Program_Latency_LSB>{c['program_lower_ns']}</Page_Program_Latency_LSB>
			<Page_Program_Latency_CSB>{c['program_upper_ns']}</Page_Program_Latency_CSB>
			<Page_Program_Latency_MSB>{c['program_upper_ns']}</Page_Program_Latency_MSB>
			<Block_Erase_Latency>{c['erase_ns']}</Block_Erase_Latency>
			<Block_PE_Cycles_Limit>10000</Block_PE_Cycles_Limit>
			<Suspend_Erase_Time>700000</Suspend_Erase_Time>
			<Suspend_Program_Time>100000</Suspend_Program_Time>
			<Die_No_Per_Chip>{c['dies_per_chip']}</Die_No_Per_Chip>
			<Plane_No_Per_Die>{c['planes_per_die']}</Plane_No_Per_Die>
			<Block_No_Per_Plane>{c['blocks_per_plane']}</Block_No_Per_Plane>
			<Page_No_Per_Block>{c['pages_per_block']}</Page_No_Per_Block>
			<Page_Capacity>{c['page_bytes']}</Page_Capacity>
			<Page_Metadat_Capacity>448</Page_Metadat_Capacity>
		</Flash_Parameter_Set>
	</Device_Parameter_Set>
</Execution_Parameter_Set>
"""
open(cfg_path, 'w').write(cfg)
chan = ",".join(str(i) for i in range(c['channels']))
chips = ",".join(str(i) for i in range(c['chips_per_channel']))
dies = ",".join(str(i) for i in range(c['dies_per_chip']))
pls = ",".join(str(i) for i in range(c['planes_per_die']))
wl = f"""<?xml version="1.0" encoding="us-ascii"?>
<!-- One trace flow over the whole drive; Enabled_Preconditioning is false in ssdconfig.xml, so
     Initial_Occupancy_Percentage has no effect. Relay_Count 1: the N copies are in the file.
     MQSim reads arrival times as nanoseconds whatever Time_Unit says (Time_Unit is parsed but
     unused, src/host/IO_Flow_Trace_Based.cpp). -->
<MQSim_IO_Scenarios>
	<IO_Scenario>
		<IO_Flow_Parameter_Set_Trace_Based>
			<Priority_Class>HIGH</Priority_Class>
			<Device_Level_Data_Caching_Mode>WRITE_CACHE</Device_Level_Data_Caching_Mode>
			<Channel_IDs>{chan}</Channel_IDs>
			<Chip_IDs>{chips}</Chip_IDs>
			<Die_IDs>{dies}</Die_IDs>
			<Plane_IDs>{pls}</Plane_IDs>
			<Initial_Occupancy_Percentage>0</Initial_Occupancy_Percentage>
			<File_Path>{trace_path}</File_Path>
			<Percentage_To_Be_Executed>100</Percentage_To_Be_Executed>
			<Relay_Count>1</Relay_Count>
			<Time_Unit>NANOSECOND</Time_Unit>
		</IO_Flow_Parameter_Set_Trace_Based>
	</IO_Scenario>
</MQSim_IO_Scenarios>
"""
open(wl_path, 'w').write(wl)
PY

# 4. Run (MQSim waits for a key at the end: stdin from /dev/null).
rm -f "$out/workload_scenario_1.xml" "$out/requests.log"
if [[ ${REQUEST_LOG:-0} == 1 ]]; then export MQSIM_REQUEST_LOG=$out/requests.log; else unset MQSIM_REQUEST_LOG; fi
set +e
(cd "$out" && /usr/bin/time -v -o "$out/time.txt" "$mqsim" -i "$out/ssdconfig.xml" -w "$out/workload.xml" \
  </dev/null >"$out/mqsim.log" 2>&1)
rc=$?
set -e
if [[ $rc -ne 0 || ! -s $out/workload_scenario_1.xml ]]; then
  echo "peer-mqsim: MQSim failed (exit $rc); see $out/mqsim.log" >&2
  tail -5 "$out/mqsim.log" >&2
  exit 1
fi

# 5. Report.
python3 - "$out" "$mqsim" <<'PY'
import sys, re, xml.etree.ElementTree as ET
out, binary = sys.argv[1], sys.argv[2]
t = open(f"{out}/time.txt").read()
def tv(key):
    m = re.search(re.escape(key) + r":\s*(.+)", t)
    return m.group(1).strip() if m else None
wall = tv("Elapsed (wall clock) time (h:mm:ss or m:ss)")
secs = 0.0
for part in wall.split(":"):
    secs = secs * 60 + float(part)
rss_mib = int(tv("Maximum resident set size (kbytes)")) / 1024
root = ET.parse(f"{out}/workload_scenario_1.xml").getroot()
flows = [e for e in root.iter() if e.tag.endswith("IO_Flow")]  # MQSim's XmlWriter: one child element per field
f = {child.tag: (child.text or "").strip() for child in flows[0]}
def g(k, d="n/a"):
    return f.get(k, d)
print(f"MQSim {binary}")
print(f"output {out}/workload_scenario_1.xml")
print(f"wall_s {secs:.2f}")
print(f"peak_rss_mib {rss_mib:.0f}")
print(f"user_s {tv('User time (seconds)')} sys_s {tv('System time (seconds)')}")
print(f"ios {g('Request_Count')} reads {g('Read_Request_Count')} writes {g('Write_Request_Count')}")
sim_s = float(g('Bytes_Transferred')) / float(g('Bandwidth')) if float(g('Bandwidth', 0)) > 0 else float('nan')
print(f"simulated_s {sim_s:.3f}  ios_per_wall_s {int(g('Request_Count')) / secs:.0f}")
print(f"stock(all I/Os, whole us, truncated): device_response mean {g('Device_Response_Time')} min {g('Min_Device_Response_Time')} "
      f"max {g('Max_Device_Response_Time')}; end_to_end mean {g('End_to_End_Request_Delay')} "
      f"min {g('Min_End_to_End_Request_Delay')} max {g('Max_End_to_End_Request_Delay')}")
if "End_to_End_Request_Delay_Read_Mean_us" in f:
    for kind, label in (("End_to_End_Request_Delay", "e2e(arrival->completion)"), ("Device_Response_Time", "device(SQ->CQ)")):
        for ty in ("Read", "Write"):
            b = f"{kind}_{ty}"
            print(f"{label} {ty.lower():5s} us: mean {g(b + '_Mean_us')} p50 {g(b + '_P50_us')} p90 {g(b + '_P90_us')} "
                  f"p99 {g(b + '_P99_us')} p99.9 {g(b + '_P99_9_us')} p99.99 {g(b + '_P99_99_us')} max {g(b + '_Max_us')}")
    print("(percentiles from the patch's log-linear histogram: within 0.4%; means and maxima exact)")
else:
    print("per-type means and percentiles: not in this binary's output (stock MQSim reports only the overall mean, min and max)")
PY
