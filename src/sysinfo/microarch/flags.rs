//! The microarchitecture told by the feature flags, where the CPUID model is missing from the
//! table or contradicts them (a hypervisor presenting a false model).

/// The row a set of cpuinfo feature flags tells, with the rule that matched, newest feature
/// first: a hypervisor may hide features a core has, but cannot give it one it lacks, so the
/// newest feature present bounds the generation from below. Where two rows share every flag
/// (Ice Lake server and client), the rule names the one chosen and why.
pub(crate) fn by_flags(
    vendor: &str,
    family: u32,
    flags: &[String],
) -> Option<(&'static str, &'static str)> {
    let has = |f: &str| flags.iter().any(|x| x == f);
    let rule = match (vendor, family) {
        ("GenuineIntel", 6) => {
            if has("amx_tile") && has("amx_fp16") {
                ("graniterapids", "AMX-TILE with AMX-FP16 is Granite Rapids")
            } else if has("amx_tile") && has("avx512_fp16") {
                (
                    "sapphirerapids",
                    "AMX-TILE with AVX512-FP16 is the Golden Cove server class (Sapphire, \
                     Emerald or Granite Rapids, whose pipes the table gives alike)",
                )
            } else if has("avx512_bf16") {
                ("cooperlake", "AVX512-BF16 without AMX is Cooper Lake")
            } else if has("avx512_vp2intersect") {
                ("tigerlake", "AVX512-VP2INTERSECT is Tiger Lake")
            } else if has("avx512_vnni") && has("avx512_vbmi") {
                (
                    "icelake-sp",
                    "AVX512-VNNI with AVX512-VBMI is Ice Lake (or Rocket Lake); the server core, \
                     with 2 AVX-512 FMA pipes, is assumed: give --fma-units 1 on a client part",
                )
            } else if has("avx512_vnni") {
                ("cascadelake", "AVX512-VNNI without VBMI is Cascade Lake")
            } else if has("avx512f") {
                ("skylake-sp", "AVX-512F without VNNI is Skylake-SP")
            } else if has("avx_vnni") {
                (
                    "alderlake",
                    "AVX-VNNI without AVX-512 is Alder or Raptor Lake",
                )
            } else if has("avx2") && has("clflushopt") {
                (
                    "skylake",
                    "AVX2 with CLFLUSHOPT and no AVX-512 is client Skylake",
                )
            } else if has("avx2") && has("adx") {
                ("broadwell", "AVX2 with ADX is Broadwell")
            } else if has("avx2") {
                ("haswell", "AVX2 without ADX is Haswell")
            } else if has("avx") && has("f16c") {
                ("ivybridge", "AVX with F16C and no AVX2 is Ivy Bridge")
            } else if has("avx") {
                ("sandybridge", "AVX without F16C is Sandy Bridge")
            } else {
                return None;
            }
        }
        // Every Zen has AVX2: without it the flags say nothing (a fixture, a hiding hypervisor).
        ("AuthenticAMD", _) if !has("avx2") => return None,
        ("AuthenticAMD", 0x17) if has("clwb") => ("zen2", "family 0x17 with CLWB is Zen 2"),
        ("AuthenticAMD", 0x17) => ("zen", "family 0x17 without CLWB is Zen or Zen+"),
        ("AuthenticAMD", 0x19) if has("avx512f") => ("zen4", "family 0x19 with AVX-512 is Zen 4"),
        ("AuthenticAMD", 0x19) => ("zen3", "family 0x19 without AVX-512 is Zen 3"),
        ("AuthenticAMD", 0x1A) => ("zen5", "family 0x1A is Zen 5"),
        _ => return None,
    };
    Some(rule)
}

#[cfg(test)]
mod tests {
    use super::super::*;

    fn flags(list: &str) -> Vec<String> {
        list.split_whitespace().map(str::to_string).collect()
    }

    /// A 2-vCPU KVM guest of a Golden Cove server Xeon, whose hypervisor presents Rocket Lake's
    /// model 0xA7 with AMX and AVX512-FP16, is identified as the Golden Cove server class, and
    /// the source says the model was overridden.
    #[test]
    fn a_false_model_is_overridden_by_the_flags() {
        let xeon =
            flags("fma avx2 avx512f avx512_vnni avx512_vbmi avx512_bf16 avx512_fp16 amx_tile");
        let fact = identify(
            "GenuineIntel",
            Some(6),
            Some(0xA7),
            Some(1),
            "Intel(R) Xeon(R) Processor",
            &xeon,
        );
        assert_eq!(fact.value.as_deref(), Some("sapphirerapids"));
        let source = fact.source.unwrap();
        assert!(
            source.contains("names rocketlake, which has no amx_tile"),
            "{source}"
        );
        assert!(
            source.contains("overridden") && source.contains("AMX-TILE with AVX512-FP16"),
            "{source}"
        );
        // A real Rocket Lake keeps its row.
        let rkl = flags("fma avx2 avx512f avx512_vnni avx512_vbmi");
        let fact = identify(
            "GenuineIntel",
            Some(6),
            Some(0xA7),
            Some(1),
            "Intel(R) Core(TM) i9-11900K",
            &rkl,
        );
        assert_eq!(fact.value.as_deref(), Some("rocketlake"));
        assert_eq!(
            fact.source.as_deref(),
            Some("CPUID family 6 model 167 (GenuineIntel)")
        );
    }

    #[test]
    fn a_model_missing_from_the_table_is_told_by_the_flags() {
        let zen4 = flags("fma avx2 avx512f avx512_bf16 avx512_vnni");
        let fact = identify(
            "AuthenticAMD",
            Some(0x19),
            Some(0x90),
            Some(0),
            "AMD EPYC",
            &zen4,
        );
        assert_eq!(fact.value.as_deref(), Some("zen4"));
        assert!(
            fact.source
                .unwrap()
                .contains("family 0x19 with AVX-512 is Zen 4")
        );
        let cases = [
            (
                "fma avx2 avx512f avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_fp16",
                "graniterapids",
            ),
            ("fma avx2 avx512f avx512_vnni avx512_bf16", "cooperlake"),
            ("fma avx2 avx512f avx512_vnni", "cascadelake"),
            ("fma avx2 avx512f", "skylake-sp"),
            ("fma avx2 avx_vnni", "alderlake"),
            ("fma avx2 adx clflushopt", "skylake"),
            ("fma avx2 adx", "broadwell"),
            ("fma avx2", "haswell"),
            ("avx f16c", "ivybridge"),
            ("avx", "sandybridge"),
        ];
        for (list, want) in cases {
            let fact = identify(
                "GenuineIntel",
                Some(6),
                Some(0x99),
                Some(1),
                "Xeon",
                &flags(list),
            );
            assert_eq!(fact.value.as_deref(), Some(want), "{list}");
        }
        // Every name a rule gives is a row of the table.
        for (list, _) in cases {
            let (name, _) = by_flags("GenuineIntel", 6, &flags(list)).unwrap();
            assert!(names().any(|n| n == name), "{name}");
        }
    }

    /// A row agrees with what its own CPU reports: no row names a flag it then refuses.
    #[test]
    fn every_row_agrees_with_its_own_features() {
        let all = flags("fma avx2 avx512f avx512_vnni avx512_bf16 avx512_fp16 amx_tile");
        for row in TABLE {
            let own: Vec<String> = all
                .iter()
                .filter(|f| row.lacks(std::slice::from_ref(f)).is_none())
                .cloned()
                .collect();
            assert_eq!(row.lacks(&own), None, "{}", row.name);
        }
        let zen = TABLE.iter().find(|r| r.name == "zen").unwrap();
        assert_eq!(
            zen.lacks(&flags("fma avx2")),
            None,
            "Zen 1 has FMA and AVX2"
        );
        let snb = TABLE.iter().find(|r| r.name == "sandybridge").unwrap();
        assert_eq!(snb.lacks(&flags("avx fma")), Some("fma"));
    }
}
