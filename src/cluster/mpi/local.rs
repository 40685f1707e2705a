//! The node-local phase: every leader starts each case when all are ready, and rank 0 gathers
//! the results of each case before the next starts.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::fault::fault;
use super::leader::Leader;
use super::messages::{CaseList, RankOutcome, Step};
use super::transport::{TAG, far};
use crate::plan::Case;
use crate::result::Failure;

impl Leader<'_> {
    /// The node-local suite: every leader starts each case when all are ready, and rank 0
    /// gathers the results of each case before the next starts.
    pub(super) fn local(&mut self, cases: &mut HashMap<String, Box<dyn Case>>, list: &CaseList) {
        let comm = self.comm;
        let others: Vec<usize> = self.leaders[1..].to_vec();
        for (i, (id, deadline_s)) in list.cases.iter().enumerate() {
            let deadline = Duration::from_secs_f64(*deadline_s);
            if comm.rank == 0 {
                self.begin(id);
                let (_, missing) = comm.gather::<Step>(&others, Instant::now() + deadline);
                if !missing.is_empty() {
                    self.give_up(
                        &missing,
                        id,
                        &format!(
                            "did not reach the start of the case within {} s",
                            deadline.as_secs()
                        ),
                    );
                }
                for &r in &others {
                    comm.send(r, TAG, &Step::Go(i), far());
                }
            } else {
                fault(&self.layout.hosts[self.me].name, id);
                comm.send(0, TAG, &Step::Ready(i), far());
                let _: Step = comm.recv_root(far(), "start of the case");
            }
            let result = match cases.remove(id) {
                Some(case) => {
                    crate::session::run_case(case, self.ctx).map_err(|e| format!("{e:#}"))
                }
                None => Err(format!(
                    "this host did not plan the case (its planning differs from rank 0's: \
                     memory, disk space?): see 'peakbench run --dry-run' on {}",
                    self.layout.hosts[self.me].name
                )),
            };
            if comm.rank != 0 {
                comm.send(0, TAG, &RankOutcome { result }, far());
                continue;
            }
            let (outcomes, missing) =
                comm.gather::<RankOutcome>(&others, Instant::now() + deadline);
            if crate::interrupt::requested() {
                // The job is being ended: the case was cut short on every host that still
                // runs; what matters is which host did not answer the stop.
                self.give_up(&missing, id, "");
            }
            let mut all = vec![(0, RankOutcome { result })];
            all.extend(outcomes);
            for (rank, outcome) in all {
                match outcome.result {
                    Ok(result) => self.session().report.results.push(result),
                    Err(why) => {
                        let failure = Failure {
                            host: self.host_of(rank),
                            rank,
                            case: id.clone(),
                            why,
                        };
                        eprintln!(
                            "peakbench cluster: {} failed on {}: {}",
                            failure.case, failure.host, failure.why
                        );
                        self.cluster().failures.push(failure);
                    }
                }
            }
            if !missing.is_empty() {
                self.give_up(
                    &missing,
                    id,
                    &format!("did not finish the case within {} s", deadline.as_secs()),
                );
            }
            self.analyse();
            self.save();
        }
    }
}
