//! The data behind the live view at `/debug/controllers` (see `docs/live-view.md`): what every controller
//! instance holds right now (queue, expectations, sync counts), the informers' caches, and the decision
//! log. Served as JSON by `crate::http`, read by the page and by `mini-kcm explain`.

use std::sync::{Arc, OnceLock};

use mini_kcm_runtime::controller::Controller;
use mini_kcm_runtime::decisions::{DecisionFilter, DecisionLog};
use mini_kcm_runtime::informers::SharedInformers;
use mini_kcm_runtime::inspect::ManagerView;

/// What the endpoints look at. The HTTP server starts before the controllers exist (so `/healthz`
/// answers during the first list): until [`LiveView::attach`] they show no controller.
#[derive(Clone)]
pub(crate) struct LiveView {
    pub decisions: DecisionLog,
    running: Arc<OnceLock<Running>>,
}

pub(crate) struct Running {
    pub controllers: Vec<Arc<dyn Controller>>,
    pub informers: SharedInformers,
}

impl LiveView {
    pub fn new(decisions: DecisionLog) -> Self {
        LiveView {
            decisions,
            running: Arc::default(),
        }
    }

    /// Makes the built controllers and their informers visible (once).
    pub fn attach(&self, running: Running) {
        let _ = self.running.set(running);
    }

    /// Controllers, queues, expectations and informers right now.
    pub fn state(&self) -> ManagerView {
        let (controllers, informers) = match self.running.get() {
            Some(running) => (
                running.controllers.iter().map(|c| c.inspect()).collect(),
                running.informers.views(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        ManagerView {
            controllers,
            informers,
            decision_log: self.decisions.is_enabled(),
        }
    }

    pub fn decisions(&self, filter: &DecisionFilter) -> Vec<mini_kcm_runtime::decisions::Decision> {
        self.decisions.recent(filter)
    }

    /// The informers, once the controllers are built (the object views read the caches).
    #[allow(dead_code)]
    pub fn informers(&self) -> Option<&SharedInformers> {
        self.running.get().map(|r| &r.informers)
    }
}
