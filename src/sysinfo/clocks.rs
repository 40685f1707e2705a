//! The base and turbo clocks of CPUs that the machine cannot tell: without cpufreq (under a
//! hypervisor, on most clouds) there is no `cpuinfo_max_freq`, and an Intel model name carries
//! only the base clock ("@ 2.30GHz"). This small table holds the models that peakbench's users
//! have reported on and those its tests name, with the vendor's figures: the base clock and the
//! maximum turbo (Intel) or boost (AMD) clock, which one core reaches alone — all cores together
//! run at or below it, so a peak at this clock bounds every case from above.
//!
//! A model matches by its family word and its number as whole words of the model name, and by
//! its generation suffix ("v2", "v3") or the absence of one, so that "E5-2670" (Sandy Bridge)
//! is not "E5-2670 v3" (Haswell), nor "8280" an "8280L".

/// The vendor's clocks of one model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct KnownClocks {
    /// Base clock, GHz.
    pub base_ghz: f64,
    /// Maximum turbo (boost) clock of one core, GHz.
    pub turbo_ghz: f64,
    /// Where the figures come from, e.g. "Intel ARK: Xeon E5-2670 v3".
    pub source: &'static str,
}

/// (family word, model number, generation suffix, base GHz, max turbo GHz, source).
type Row = (
    &'static str,
    &'static str,
    Option<&'static str>,
    f64,
    f64,
    &'static str,
);

const TABLE: &[Row] = &[
    // Users' reports: Sandy Bridge, Ivy Bridge and Haswell Xeons of their clusters.
    ("Xeon", "E3-1225", None, 3.1, 3.4, "Intel ARK: Xeon E3-1225"),
    ("Xeon", "E5-2670", None, 2.6, 3.3, "Intel ARK: Xeon E5-2670"),
    (
        "Xeon",
        "E5-2670",
        Some("v2"),
        2.5,
        3.3,
        "Intel ARK: Xeon E5-2670 v2",
    ),
    (
        "Xeon",
        "E5-2670",
        Some("v3"),
        2.3,
        3.1,
        "Intel ARK: Xeon E5-2670 v3",
    ),
    ("Xeon", "E5-2680", None, 2.7, 3.5, "Intel ARK: Xeon E5-2680"),
    (
        "Xeon",
        "E5-2680",
        Some("v2"),
        2.8,
        3.6,
        "Intel ARK: Xeon E5-2680 v2",
    ),
    // Models the peak tests name.
    ("Core", "i7-4770", None, 3.4, 3.9, "Intel ARK: Core i7-4770"),
    (
        "Xeon",
        "4110",
        None,
        2.1,
        3.0,
        "Intel ARK: Xeon Silver 4110",
    ),
    ("Xeon", "5218", None, 2.3, 3.9, "Intel ARK: Xeon Gold 5218"),
    ("Xeon", "6248", None, 2.5, 3.9, "Intel ARK: Xeon Gold 6248"),
    (
        "Xeon",
        "8280",
        None,
        2.7,
        4.0,
        "Intel ARK: Xeon Platinum 8280",
    ),
    ("EPYC", "7742", None, 2.25, 3.4, "AMD: EPYC 7742"),
];

/// The clocks of the CPU named `model_name`, if it is in the table.
pub(crate) fn known(model_name: &str) -> Option<KnownClocks> {
    let words: Vec<&str> = model_name.split_whitespace().collect();
    // "Intel(R) Core(TM)" and "Xeon(R)" carry their marks: compare the word before them.
    let bare = |w: &str| w.split('(').next().unwrap_or(w).to_string();
    TABLE
        .iter()
        .find_map(|&(family, number, suffix, base, turbo, source)| {
            if !words.iter().any(|w| bare(w) == family) {
                return None;
            }
            let at = words.iter().position(|w| *w == number)?;
            let next = words.get(at + 1).copied();
            let generation = next.filter(|w| {
                w.len() >= 2 && w.starts_with('v') && w[1..].chars().all(|c| c.is_ascii_digit())
            });
            (generation == suffix).then_some(KnownClocks {
                base_ghz: base,
                turbo_ghz: turbo,
                source,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_of_the_users_reports_are_told_apart_by_generation() {
        let v3 = known("Intel(R) Xeon(R) CPU E5-2670 v3 @ 2.30GHz").unwrap();
        assert_eq!((v3.base_ghz, v3.turbo_ghz), (2.3, 3.1));
        assert_eq!(v3.source, "Intel ARK: Xeon E5-2670 v3");
        let v2 = known("Intel(R) Xeon(R) CPU E5-2670 v2 @ 2.50GHz").unwrap();
        assert_eq!((v2.base_ghz, v2.turbo_ghz), (2.5, 3.3));
        // The first generation prints a 0 where the others print their suffix.
        let v1 = known("Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz").unwrap();
        assert_eq!((v1.base_ghz, v1.turbo_ghz), (2.6, 3.3));
        let e3 = known("Intel(R) Xeon(R) CPU E3-1225 @ 3.10GHz").unwrap();
        assert_eq!(e3.turbo_ghz, 3.4);
        let i7 = known("Intel(R) Core(TM) i7-4770 CPU @ 3.40GHz").unwrap();
        assert_eq!(i7.turbo_ghz, 3.9);
        let epyc = known("AMD EPYC 7742 64-Core Processor").unwrap();
        assert_eq!((epyc.base_ghz, epyc.turbo_ghz), (2.25, 3.4));
    }

    #[test]
    fn other_models_and_virtual_cpus_are_not_guessed() {
        assert_eq!(known("Intel(R) Xeon(R) CPU E5-2670 v4 @ 2.30GHz"), None);
        assert_eq!(known("Intel(R) Xeon(R) Platinum 8280L CPU @ 2.70GHz"), None);
        assert_eq!(known("Intel(R) Core(TM) i7-4770K CPU @ 3.50GHz"), None);
        // QEMU's model for a Sandy Bridge guest names no real part.
        assert_eq!(known("Intel Xeon E312xx (Sandy Bridge)"), None);
        assert_eq!(known("AMD EPYC"), None);
        assert_eq!(known(""), None);
    }
}
