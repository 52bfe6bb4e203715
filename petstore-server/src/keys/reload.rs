//! [`Rerun`]: how reloads of the keys file (SIGHUP) are serialised.

use std::sync::atomic::{AtomicBool, Ordering};

/// One job at a time, run again once if asked while it runs: how reloads
/// of the keys file are serialised without queueing a thread per signal.
#[derive(Debug, Default)]
pub struct Rerun {
    running: AtomicBool,
    again: AtomicBool,
}

impl Rerun {
    /// Asks for a run; true when the caller must start the runner (none
    /// runs), false when the running one will run the job again.
    pub fn request(&self) -> bool {
        self.again.store(true, Ordering::SeqCst);
        !self.running.swap(true, Ordering::SeqCst)
    }

    /// The runner could not be started.
    pub fn abandon(&self) {
        self.running.store(false, Ordering::SeqCst);
    }

    /// The runner: runs `job` until no request is left.
    pub fn run(&self, mut job: impl FnMut()) {
        loop {
            self.again.store(false, Ordering::SeqCst);
            job();
            if self.again.load(Ordering::SeqCst) {
                continue;
            }
            self.running.store(false, Ordering::SeqCst);
            // A request between the check above and the store saw a
            // runner still running: take it over, unless a new runner did.
            if !self.again.load(Ordering::SeqCst) || self.running.swap(true, Ordering::SeqCst) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;

    #[test]
    fn a_stuck_job_is_never_run_twice_at_once_and_runs_again_once_after() {
        let rerun = Arc::new(Rerun::default());
        let (release, released) = mpsc::channel::<()>();
        let (started, starts) = mpsc::channel::<()>();
        assert!(rerun.request());
        let runner = {
            let rerun = Arc::clone(&rerun);
            std::thread::spawn(move || {
                rerun.run(|| {
                    started.send(()).unwrap();
                    released.recv().unwrap();
                })
            })
        };
        starts.recv().unwrap();
        // While the first run is stuck, more requests start nothing new.
        for _ in 0..5 {
            assert!(!rerun.request());
        }
        release.send(()).unwrap();
        // One more run for all of them, then the runner ends.
        starts.recv().unwrap();
        release.send(()).unwrap();
        runner.join().unwrap();
        assert!(starts.try_recv().is_err());
        // Idle again: the next request starts a runner.
        assert!(rerun.request());
    }
}
