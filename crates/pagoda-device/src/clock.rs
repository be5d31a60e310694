//! Emulated time for `latency=emulate` devices: a modeled nanosecond timeline mapped onto the
//! wall clock through a `time_scale` factor (real = modeled × time_scale), so that a quicker
//! run keeps the ratios.

use std::time::{Duration, Instant};

/// A device's view of time.
#[derive(Clone, Copy, Debug)]
pub struct EmuClock {
    origin: Instant,
    time_scale: f64,
}

impl EmuClock {
    /// A clock starting now. `time_scale` must be > 0 (1.0 = real time).
    pub fn new(time_scale: f64) -> Self {
        Self {
            origin: Instant::now(),
            time_scale: if time_scale > 0.0 { time_scale } else { 1.0 },
        }
    }

    /// The scale factor.
    pub fn time_scale(&self) -> f64 {
        self.time_scale
    }

    /// Modeled nanoseconds since the clock started.
    pub fn now_ns(&self) -> u64 {
        (self.origin.elapsed().as_nanos() as f64 / self.time_scale) as u64
    }

    /// Blocks the calling thread until modeled time `model_ns`. Sleeps when the wait is long;
    /// yields for the last stretch because OS sleeps overshoot by tens of microseconds.
    pub fn wait_until(&self, model_ns: u64) {
        let target = self.origin + Duration::from_nanos((model_ns as f64 * self.time_scale) as u64);
        loop {
            let now = Instant::now();
            if now >= target {
                return;
            }
            let left = target - now;
            if left > Duration::from_micros(200) {
                std::thread::sleep(left - Duration::from_micros(100));
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_at_least_the_scaled_time() {
        let c = EmuClock::new(0.5);
        let t0 = Instant::now();
        let target = c.now_ns() + 2_000_000; // 2 ms modeled = 1 ms real
        c.wait_until(target);
        assert!(t0.elapsed() >= Duration::from_micros(900));
        assert!(c.now_ns() >= target);
    }
}
