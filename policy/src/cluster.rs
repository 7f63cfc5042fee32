//! A prepared view of one offer cycle's capacity: offers merged per agent and
//! locality groups numbered once, so that several what-if placements in the
//! same cycle do not redo that work. Read-only: it never books capacity (a
//! queue round does that, see [`crate::queue_round`]).

use crate::capacity::AgentCapacity;
use crate::demand::JobDemand;
use crate::engine::place_on;
use crate::ledger::Ledger;
use crate::placement::Placement;
use crate::score::Scorer;
use crate::unfit::Unfit;

/// The offers of one cycle, ready for [`Cluster::place`].
pub struct Cluster<'a> {
    ledger: Ledger<'a>,
    scorer: &'a dyn Scorer,
}

impl<'a> Cluster<'a> {
    pub fn new(offers: &'a [AgentCapacity], scorer: &'a dyn Scorer) -> Self {
        Self { ledger: Ledger::new(offers, scorer.locality_key()), scorer }
    }

    /// Where `job` would go on this capacity, exactly as [`crate::place_with`] answers.
    pub fn place(&self, job: &JobDemand) -> Result<Placement, Unfit> {
        place_on(job, &self.ledger, self.scorer).map(|placed| placed.placement)
    }

    /// Agents in the view, after merging duplicates and leaving out bad offers.
    pub fn agents(&self) -> usize {
        self.ledger.len()
    }
}
