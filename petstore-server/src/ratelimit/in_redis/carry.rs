//! Carry-over: a cluster state missing under its group's hash tag takes
//! over the form the previous version kept under the key's own tag, in
//! another slot. [`RedisLimits::read_previous`] reads it (`carry.lua`).

use super::failure::Failure;
use super::limits::RedisLimits;
use super::part::Part;
use super::script::{text_name, Previous};

impl RedisLimits {
    /// Reads the previous form of each of `parts` (a cluster's states
    /// missing under their group's tag: kept under their own hash tag,
    /// each in its own slot; all read at once) into its
    /// [`Previous::Read`], and returns the parts read. A part whose form
    /// could not be read within the timeout is dropped, so its requests
    /// fall back (a state's previous form is never skipped, or a deploy
    /// would refill its quota or lift its ban). The slot it is read from
    /// has its own breaker: a master that is down costs one timeout, then
    /// the states whose previous form it holds fall back at once, as its
    /// own keys do.
    pub(super) async fn read_previous(&self, parts: Vec<Part>) -> Vec<Part> {
        let mut reads = tokio::task::JoinSet::new();
        let mut slots: Vec<Option<Part>> = Vec::with_capacity(parts.len());
        for part in parts {
            let home = self.inner.link.home_shard(&part.name);
            if !self.inner.breakers.may_try(home) {
                self.give_back_bans(std::slice::from_ref(&part));
                continue;
            }
            let (link, carry, timeout) = (
                self.inner.link.clone(),
                self.inner.carry.clone(),
                self.inner.timeout,
            );
            let keys = [text_name(&part.name), part.name.to_string()];
            let i = slots.len();
            slots.push(Some(part));
            reads.spawn(async move {
                let mut invocation = carry.prepare_invoke();
                invocation.key(&keys[0]).key(&keys[1]);
                let read = tokio::time::timeout(timeout, link.invoke::<String>(&invocation)).await;
                (i, home, read)
            });
        }
        let mut read = Vec::with_capacity(slots.len());
        while let Some(joined) = reads.join_next().await {
            // A read task cannot panic short of a bug; its part is then
            // left in `slots` and dropped below, so its requests fall back.
            let Ok((i, home, outcome)) = joined else {
                continue;
            };
            let Some(mut part) = slots.get_mut(i).and_then(Option::take) else {
                continue;
            };
            let failure = match outcome {
                Ok(Ok(text)) => {
                    self.answered(home);
                    part.previous = Previous::Read(text);
                    read.push(part);
                    continue;
                }
                Ok(Err(e)) => Failure::of(&e),
                Err(_) => Failure::timed_out(self.inner.timeout),
            };
            self.give_back_bans(std::slice::from_ref(&part));
            match failure {
                Failure::Call(why) => self.state_trouble(
                    &part.name,
                    &format!("its previous form could not be read: {why}"),
                ),
                Failure::Unreachable(e) => {
                    self.unreachable(home, e, " (reading a limiter state's previous form)")
                }
            }
        }
        for part in slots.into_iter().flatten() {
            self.give_back_bans(std::slice::from_ref(&part));
        }
        read
    }
}
