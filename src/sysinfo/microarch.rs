//! The microarchitecture of a CPU, told from its CPUID vendor, family, model and stepping.

use super::Fact;

/// Microarchitecture told from the CPUID vendor, family, model and stepping, as one of the
/// names the throughput table is keyed on, or unknown with the reason.
pub fn identify(
    vendor: &str,
    family: Option<u32>,
    model: Option<u32>,
    stepping: Option<u32>,
    model_name: &str,
) -> Fact<String> {
    let (Some(family), Some(model)) = (family, model) else {
        return Fact::unknown(format!(
            "no cpu family and model in /proc/cpuinfo for '{model_name}' ({vendor})"
        ));
    };
    let name = match vendor {
        "GenuineIntel" if family == 6 => intel_family6(model, stepping),
        "AuthenticAMD" => amd_zen(family, model),
        _ => None,
    };
    let stepping_text = match stepping {
        Some(s) if vendor == "GenuineIntel" && family == 6 && model == 0x55 => {
            format!(" stepping {s}")
        }
        _ => String::new(),
    };
    let told = format!("CPUID family {family} model {model}{stepping_text} ({vendor})");
    match name {
        Some(name) => Fact::read(name.to_string(), told),
        None => Fact::unknown(format!(
            "{told}, model 0x{model:02X}, '{model_name}', is not in the microarchitecture table"
        )),
    }
}

fn intel_family6(model: u32, stepping: Option<u32>) -> Option<&'static str> {
    Some(match model {
        0x3C | 0x3F | 0x45 | 0x46 => "haswell",
        0x3D | 0x47 | 0x4F | 0x56 => "broadwell",
        0x4E | 0x5E | 0x8E | 0x9E | 0xA5 | 0xA6 => "skylake",
        0x55 => match stepping? {
            0..=4 => "skylake-sp",
            5..=7 => "cascadelake",
            10.. => "cooperlake",
            _ => return None,
        },
        0x7D | 0x7E => "icelake",
        0x6A | 0x6C => "icelake-sp",
        0x8C | 0x8D => "tigerlake",
        0x97 | 0x9A | 0xB7 | 0xBA | 0xBF => "alderlake",
        0x8F => "sapphirerapids",
        0xCF => "emeraldrapids",
        0xAD | 0xAE => "graniterapids",
        _ => return None,
    })
}

fn amd_zen(family: u32, model: u32) -> Option<&'static str> {
    match (family, model) {
        (0x17, 0x00..0x30) => Some("zen"),
        (0x17, _) => Some("zen2"),
        (0x19, 0x00..=0x0F | 0x20..=0x5F) => Some("zen3"),
        (0x19, 0x10..=0x1F | 0x60..=0x7F | 0xA0..=0xAF) => Some("zen4"),
        (0x1A, _) => Some("zen5"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microarch_corner_cases() {
        let intel = |model, stepping| {
            identify("GenuineIntel", Some(6), Some(model), Some(stepping), "Xeon")
                .value
                .unwrap_or_default()
        };
        assert_eq!(intel(0x55, 4), "skylake-sp");
        assert_eq!(intel(0x55, 7), "cascadelake");
        assert_eq!(intel(0x55, 5), "cascadelake");
        assert_eq!(intel(0x55, 11), "cooperlake");
        assert_eq!(intel(0x55, 8), "");
        assert_eq!(intel(0x8F, 8), "sapphirerapids");
        assert_eq!(intel(0x3F, 2), "haswell");
        assert_eq!(intel(0xAD, 1), "graniterapids");
        let amd = |family, model| {
            identify("AuthenticAMD", Some(family), Some(model), Some(0), "EPYC")
                .value
                .unwrap_or_default()
        };
        assert_eq!(amd(0x17, 0x01), "zen");
        assert_eq!(amd(0x17, 0x2F), "zen");
        assert_eq!(amd(0x17, 0x31), "zen2");
        assert_eq!(amd(0x19, 0x01), "zen3");
        assert_eq!(amd(0x19, 0x11), "zen4");
        assert_eq!(amd(0x19, 0x21), "zen3");
        assert_eq!(amd(0x19, 0x61), "zen4");
        assert_eq!(amd(0x19, 0xA0), "zen4");
        assert_eq!(amd(0x19, 0x90), "");
        assert_eq!(amd(0x1A, 0x02), "zen5");

        let no_stepping = identify("GenuineIntel", Some(6), Some(0x55), None, "Xeon");
        assert!(no_stepping.value.is_none());
        let unknown = identify("GenuineIntel", Some(6), Some(0x99), Some(1), "Mystery");
        assert_eq!(
            unknown.reason.as_deref(),
            Some(
                "CPUID family 6 model 153 (GenuineIntel), model 0x99, 'Mystery', is not in \
                 the microarchitecture table"
            )
        );
        assert!(
            identify("HygonGenuine", Some(0x18), Some(1), Some(1), "Hygon")
                .value
                .is_none()
        );
    }
}
