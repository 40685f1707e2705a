//! A fault the tests inject: a host that stops answering at a chosen step. Read only in test
//! builds (the cargo feature `test-hooks`); without it the hook is an empty function and the
//! user's binary never looks at the variable.

#[cfg(feature = "test-hooks")]
/// For the tests of the deadlines only: `PEAKBENCH_CLUSTER_FAULT=HOST:STEP` makes the ranks of
/// host HOST stop answering (sleep for good) when they reach the first step that starts with
/// STEP: a node-local case id (`cpu` for the first CPU case), `matrix` (the first round) or
/// `collectives`.
pub(super) fn fault(host: &str, step: &str) {
    let Ok(fault) = std::env::var("PEAKBENCH_CLUSTER_FAULT") else {
        return;
    };
    if fault
        .split_once(':')
        .is_some_and(|(h, s)| h == host && !s.is_empty() && step.starts_with(s))
    {
        eprintln!("peakbench cluster: PEAKBENCH_CLUSTER_FAULT: {host} stops answering at {step}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// The test hook compiled out: nothing to inject.
#[cfg(not(feature = "test-hooks"))]
pub(super) fn fault(_host: &str, _step: &str) {}
