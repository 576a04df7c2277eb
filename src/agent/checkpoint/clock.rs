//! Time as the checkpoints keep it: nanoseconds since the epoch, and the
//! filesystem's coarse clock waited past so that birth times order files.
use std::time::{SystemTime, UNIX_EPOCH};

/// Waits (a clock tick at most) until the filesystem's clock, the coarse
/// one, is past `ns`: every file made after this gets a later timestamp,
/// and every file made before it an earlier one, so birth times tell the
/// task's files from older ones exactly (see `Stat::existed_before`).
pub(super) fn wait_past(ns: u64) {
    for _ in 0..200 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes only to `ts`.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 {
            return;
        }
        let coarse = (ts.tv_sec as i128) * 1_000_000_000 + ts.tv_nsec as i128;
        if coarse > i128::from(ns) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

pub(super) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub(super) fn from_ns(ns: u64) -> SystemTime {
    UNIX_EPOCH + std::time::Duration::from_nanos(ns)
}
