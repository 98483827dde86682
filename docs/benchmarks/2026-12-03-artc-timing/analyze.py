import csv, statistics, collections, sys
rows = list(csv.DictReader(open(sys.argv[1] if len(sys.argv) > 1 else '/var/tmp/ms2/timing.csv')))
by = collections.defaultdict(list)
for r in rows:
    if r['seconds']:
        by[(r['job'], r['fs'], r['kind'])].append(float(r['seconds']))
jobs = sorted({k[0] for k in by}, key=['db', 'fio', 'tree'].index)
fss = ['ext4', 'xfs', 'btrfs', 'ext4-bfq', 'ext4-slow']
errs = collections.defaultdict(list)
print('| job | target fs | real s (median [min-max]) | ARTC s | TO s | ST s | ARTC err | TO err | ST err |')
print('|---|---|---:|---:|---:|---:|---:|---:|---:|')
for j in jobs:
    for fs in fss:
        real = by.get((j, fs, 'real'))
        if not real:
            continue
        rm = statistics.median(real)
        cells, es = [], []
        for m in ['artc', 'to', 'st']:
            v = by.get((j, fs, m), [])
            if not v:
                cells.append('-'); es.append('-'); continue
            med = statistics.median(v)
            e = (med - rm) / rm * 100
            errs[m].append(abs(e))
            cells.append(f'{med:.2f} [{min(v):.2f}-{max(v):.2f}]')
            es.append(f'{e:+.1f}%')
        print(f'| {j} | {fs} | {rm:.2f} [{min(real):.2f}-{max(real):.2f}] | ' + ' | '.join(cells) + ' | ' + ' | '.join(es) + ' |')
print()
for m in ['artc', 'to', 'st']:
    if errs[m]:
        print(f'{m}: mean |error| {statistics.mean(errs[m]):.1f}% over {len(errs[m])} settings (max {max(errs[m]):.1f}%)')
