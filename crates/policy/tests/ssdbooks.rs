//! MittSSD's own books (issue 13): what a host can predict from the page map, the data sheet
//! and the I/Os it submitted, and what it learns from late reads.

use iolearn_policy::admission::{Admission, IoView, Started};
use iolearn_policy::latency::LatencyHistory;
use iolearn_policy::ssdbooks::{MittSsdBooks, NandCommand, NandOp, SsdProfile};

const US: u64 = 1_000;

/// 8 planes on 4 channels.
fn profile() -> SsdProfile {
    SsdProfile {
        planes: 8,
        channels: 4,
        read_ns: 50 * US,
        program_lower_ns: 400 * US,
        program_upper_ns: 600 * US,
        erase_ns: 3_000 * US,
        transfer_ns: 10 * US,
        controller_ns: 3 * US,
    }
}

fn cmd(issued_ns: u64, plane: u32, op: NandOp) -> NandCommand {
    NandCommand { issued_ns, plane, op }
}

/// A read of `planes` issued at `now_ns` (its sense commands after the controller's 3 us),
/// then its start: as the simulator reports them.
fn issue_read(m: &mut MittSsdBooks, id: u64, now_ns: u64, planes: &[u32]) {
    let cmds: Vec<_> = planes.iter().map(|&p| cmd(now_ns + 3 * US, p, NandOp::Read)).collect();
    m.book(0, &cmds);
    m.started(&read(id, now_ns, planes));
}

fn view<'a>(h: &'a LatencyHistory, now_ns: u64, planes: &'a [u32]) -> IoView<'a> {
    IoView {
        now_ns,
        size: 4096 * planes.len().max(1) as u32,
        offset: 0,
        pending: 0,
        pending_pages: 1,
        history: h,
        oldest_inflight_ns: 0,
        since_completion_ns: 0,
        white_box: None,
        true_latency_ns: None,
        cached: false,
        replica: 0,
        planes: Some(planes),
        books_ns: None,
        deadline_ns: None,
    }
}

fn read(id: u64, now_ns: u64, planes: &[u32]) -> Started<'_> {
    Started {
        replica: 0,
        id,
        now_ns,
        offset: 0,
        len: 4096 * planes.len() as u64,
        write: false,
        planes,
    }
}

#[test]
fn a_read_waits_for_what_its_planes_and_channels_were_given() {
    let h = LatencyHistory::default();
    let mut m = MittSsdBooks::new(100 * US, profile());
    // Idle: controller, sense, transfer.
    assert_eq!(m.predict_ns(&view(&h, 0, &[3])), 63 * US);
    // Nothing on flash (buffered or never written): a DRAM copy.
    assert_eq!(m.predict_ns(&view(&h, 0, &[])), 5 * US);
    issue_read(&mut m, 1, 0, &[3]);
    // Behind it on plane 3: sensed at 103 us, then sent.
    assert_eq!(m.predict_ns(&view(&h, 0, &[3])), 113 * US);
    // Plane 7 shares channel 3: sensed at 53 us, but the channel is busy until 63.
    assert_eq!(m.predict_ns(&view(&h, 0, &[7])), 73 * US);
    // Plane 4 is free on a free channel.
    assert_eq!(m.predict_ns(&view(&h, 0, &[4])), 63 * US);
    // A read of two pages is as late as its later page; predicting books nothing.
    assert_eq!(m.predict_ns(&view(&h, 0, &[4, 3])), 113 * US);
    assert_eq!(m.predict_ns(&view(&h, 0, &[4])), 63 * US);
    // The deadline: 113 us misses 100, 63 does not.
    assert!(!m.admit(&view(&h, 0, &[3])));
    assert!(m.admit(&view(&h, 0, &[4])));
    // Other replicas keep other books.
    assert_eq!(
        m.predict_ns(&IoView {
            replica: 1,
            ..view(&h, 0, &[3])
        }),
        63 * US
    );
}

#[test]
fn programs_and_collections_hold_their_planes_as_the_data_sheet_says() {
    let h = LatencyHistory::default();
    let mut m = MittSsdBooks::new(100 * US, profile());
    // A lower page on plane 0 and an upper one on plane 1 at 0: each crosses its channel
    // (10 us), then programs (400 / 600 us). A read there is sensed after.
    m.book(
        0,
        &[
            cmd(0, 0, NandOp::Program { upper: false }),
            cmd(0, 1, NandOp::Program { upper: true }),
        ],
    );
    assert_eq!(m.predict_ns(&view(&h, 0, &[0])), 410 * US + 60 * US);
    assert_eq!(m.predict_ns(&view(&h, 0, &[1])), 610 * US + 60 * US);
    // A collection moving 2 pages (a read and a mean program each), then an erase.
    let collect = |moves, via_channel| NandOp::Collect { moves, via_channel };
    m.book(0, &[cmd(0, 2, collect(2, false))]);
    assert_eq!(m.predict_ns(&view(&h, 0, &[2])), 2 * 550 * US + 3_000 * US + 60 * US);
    // Plane 6 shares plane 2's channel, which a copyback collection does not hold...
    assert_eq!(m.predict_ns(&view(&h, 0, &[6])), 63 * US);
    // ...and one whose pages cross the channel does, twice per page from its start: four
    // moves hold channel 3 until 80 us, past plane 7's sense at 53.
    m.book(0, &[cmd(0, 3, collect(4, true))]);
    assert_eq!(m.predict_ns(&view(&h, 0, &[7])), 80 * US + 10 * US);
}

#[test]
fn a_transfer_ready_now_goes_before_one_booked_far_ahead() {
    let h = LatencyHistory::default();
    let mut m = MittSsdBooks::new(100 * US, profile());
    // Plane 0 is programming until 610 us; a read there is sent at 670 us on channel 0.
    m.book(0, &[cmd(0, 0, NandOp::Program { upper: true })]);
    issue_read(&mut m, 1, 0, &[0]);
    // Plane 4 (channel 0) is free: its page is sent at once, in the gap, not after 670.
    assert_eq!(m.predict_ns(&view(&h, 100 * US, &[4])), 63 * US);
    // A read of plane 4 at 600 us: sensed at 653, and the channel is taken 660-670: sent at
    // 670, done at 680.
    assert_eq!(m.predict_ns(&view(&h, 600 * US, &[4])), 80 * US);
}

#[test]
fn an_overdue_read_shows_its_plane_stuck_and_its_completion_moves_the_books() {
    let h = LatencyHistory::default();
    let mut m = MittSsdBooks::new(100 * US, profile());
    issue_read(&mut m, 1, 0, &[2]);
    // Due at 63 us. Until then plane 2 is as booked (sensed at 53 us: a read there is sensed
    // at 103 and sent at 113); after, it is stuck on work the books missed (a collection
    // whose commands they did not see), for as long again as it has been overdue (no late
    // read seen yet).
    assert_eq!(m.predict_ns(&view(&h, 50 * US, &[2])), 63 * US);
    let stuck = m.predict_ns(&view(&h, 163 * US, &[2]));
    assert_eq!(stuck, 100 * US + 60 * US, "stuck 100 us more, then sensed and sent");
    assert!(!m.admit(&view(&h, 163 * US, &[2])));
    // Its neighbours are not.
    assert_eq!(m.predict_ns(&view(&h, 163 * US, &[6])), 63 * US);
    // A second read queued behind it, then the first comes back 5 ms late: the second moves
    // with it (against its corrected prediction it is not late), the lateness is learnt.
    issue_read(&mut m, 2, 164 * US, &[2]);
    m.finished(0, 1, 5_000 * US);
    let t = 5_001 * US;
    let behind = m.predict_ns(&view(&h, t, &[2]));
    assert!(behind > 63 * US && behind < 300 * US, "{behind}");
    m.finished(0, 2, 5_060 * US);
    assert_eq!(m.predict_ns(&view(&h, 5_100 * US, &[2])), 63 * US);
    // What it learnt: a read 100 us overdue is expected to run as late as that read did
    // (4,937 us), 4,837 us more.
    issue_read(&mut m, 3, 6_000 * US, &[5]);
    let stuck = m.predict_ns(&view(&h, 6_163 * US, &[5]));
    assert_eq!(stuck, 4_837 * US + 60 * US);
    // Unknown completions (writes, cancelled copies) change nothing.
    m.finished(0, 99, 6_100 * US);
    assert_eq!(m.predict_ns(&view(&h, 6_163 * US, &[5])), stuck);
}

#[test]
fn without_the_page_map_the_books_predict_nothing() {
    let h = LatencyHistory::default();
    let mut m = MittSsdBooks::new(100 * US, profile());
    issue_read(&mut m, 1, 0, &[3]);
    let v = IoView {
        planes: None,
        ..view(&h, 0, &[3])
    };
    assert_eq!(m.predict_ns(&v), 0);
    assert!(m.admit(&v));
    assert!(m.needs().layout);
}
