//! What the fuzz targets (`fuzz/`, cargo-fuzz on nightly) and their stable twins
//! (`tests/fuzz_props.rs`, a seeded loop in `cargo test`) feed outside bytes to: one function
//! per parser that reads outside input, each doing what peakbench does with such input. Each
//! returns normally for any input; a panic, or a raw control character in text meant for a
//! terminal, is a finding (the assertions here make the latter a crash too).
//!
//! Declared in lib.rs after the workloads (it reaches `net`'s handshake and datagram counting)
//! and before the commands, which it does not use; the config target calls `config` itself.

use std::time::Duration;

use crate::net::auth::{Key, Nonce};
use crate::net::data::UdpTally;
use crate::net::proto::{MAX_LINE, Msg, escaped};
use crate::net::server::{Policy, judge_hello};
use crate::result::Report;

/// Whether `text` is safe on a terminal: no byte below 0x20 but `\n` and `\t`, no DEL, no C1
/// control (U+0080–U+009F, CSI U+009B among them), no bidirectional override.
pub fn terminal_safe(text: &str) -> bool {
    !text.chars().any(|c| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

/// One CLI value parser of src/options.rs, picked by `which`, given `text` (a list's elements
/// split at commas as clap does).
pub fn cli_value(which: u8, text: &str) {
    use crate::options as o;
    let _ = match which % 12 {
        0 => o::duration(text).map(|_| ()),
        1 => o::positive_duration(text).map(|_| ()),
        2 => o::positive_size(text).map(|_| ()),
        3 => o::positive_count(text).map(|_| ()),
        4 => o::positive_u32(text).map(|_| ()),
        5 => o::positive_f64(text).map(|_| ()),
        6 => o::peak_factor(text).map(|_| ()),
        7 => o::percent(text).map(|_| ()),
        8 => o::bit_rate(text).map(|_| ()),
        9 => o::thread_count(text).map(|_| ()),
        10 => text
            .split(',')
            .map(o::thread_count)
            .collect::<Result<Vec<_>, _>>()
            .map(|list| drop(o::unique(&list))),
        _ => crate::units::parse_size(text).map(|_| ()).map_err(|e| e.0),
    };
}

/// Bytes on a control connection, as the server reads them: lines of at most [`MAX_LINE`]
/// bytes, each decoded as a message (what a decoding error would log is escaped), the first
/// one judged as the hello of the handshake by a server with a key and one without.
pub fn control_bytes(data: &[u8]) {
    let mut first = true;
    for line in data.split(|&b| b == b'\n') {
        if line.len() > MAX_LINE {
            return; // the server drops the connection here
        }
        let decoded: anyhow::Result<Msg> = serde_json::from_slice(line).map_err(|e| {
            anyhow::anyhow!(
                "malformed control message: {}",
                escaped(&String::from_utf8_lossy(&line[..line.len().min(80)]))
            )
            .context(e.to_string())
        });
        if let Err(e) = &decoded {
            assert!(terminal_safe(&escaped(&format!("{e:#}"))));
        }
        if first {
            first = false;
            let nonce = Nonce::from_hex(&"ab".repeat(32)).expect("64 hex digits");
            let keyed = Policy {
                key: Some(Key::from_bytes(&[7u8; 32]).expect("32 bytes are a key")),
                max_test: Duration::from_secs(600),
                ..Policy::default()
            };
            let refit = |d: &anyhow::Result<Msg>| match d {
                Ok(m) => Ok(m.clone()),
                Err(e) => Err(anyhow::anyhow!("{e:#}")),
            };
            for policy in [&keyed, &Policy::default()] {
                if let Err(why) = judge_hello(refit(&decoded), &nonce, policy) {
                    assert!(terminal_safe(&escaped(&why)));
                }
            }
        }
    }
}

/// UDP datagrams as a receiver sees them: `data` cut into datagrams by a two-byte length
/// prefix, each counted with a fixed token at a growing arrival time.
pub fn udp_datagrams(data: &[u8]) {
    let token = 0x1234_5678_9abc_def0u64;
    let mut tally = UdpTally::default();
    let mut rest = data;
    let mut arrival = 1_000_000u64;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])) % 64;
        rest = &rest[2..];
        let (datagram, after) = rest.split_at(len.min(rest.len()));
        let mut bytes = datagram.to_vec();
        // Most datagrams carry the token, so the header's other fields are reached.
        if bytes.len() >= 4 && bytes[0] & 1 == 0 {
            bytes[..4].copy_from_slice(&(token as u32).to_le_bytes());
        }
        tally.record(&bytes, token, arrival);
        arrival = arrival.wrapping_add(u64::from(rest.first().copied().unwrap_or(1)) * 1000);
        rest = after;
    }
    let counts = &tally.counts;
    assert!(counts.jitter_ns.is_finite() && counts.jitter_ns >= 0.0);
    assert!(counts.reordered <= counts.received);
}

/// A JSON results document as `import`, `report FILE`, `compare FILE` and `explain FILE` read
/// it ([`Report::parse`], which validates), then every renderer: the text table, `show`'s and
/// `compare`'s lines, the findings text and `explain`'s judging (all for a terminal: no raw
/// control character), Markdown, HTML, CSV and JSON.
pub fn document(text: &str) {
    use crate::report::{Csv, Exporter, Html, JsonDocument, Markdown, MarkdownTables, TextReport};
    let report = match Report::parse(text) {
        Ok(report) => report,
        // A refusal reaches the terminal too, naming the field it stopped in.
        Err(why) => {
            assert!(terminal_safe(&why), "raw control character in {why:?}");
            return;
        }
    };
    let terminal = [
        String::from_utf8(TextReport.export(&report)).expect("the table is UTF-8"),
        crate::history::compare::render(1, &report, 2, &report),
        crate::text::printable(&crate::history::short_command(&report.command.join(" "))),
    ];
    for shown in &terminal {
        assert!(terminal_safe(shown), "raw control character in {shown:?}");
    }
    if let Some(findings) = &report.findings {
        let shown = crate::report::findings::render_text(findings);
        assert!(terminal_safe(&shown), "raw control character in {shown:?}");
    }
    let judged = crate::findings::judge(&report, &[]);
    let shown = crate::report::findings::render_text(&judged);
    assert!(terminal_safe(&shown), "raw control character in {shown:?}");
    let runs = [(1, &report), (2, &report)];
    let exporters: [&dyn Exporter; 6] = [
        &TextReport,
        &Markdown,
        &Csv,
        &JsonDocument,
        &MarkdownTables,
        &Html { run: 1 },
    ];
    for exporter in exporters {
        let _ = exporter.export(&report);
        let _ = exporter.export_runs(&runs);
    }
}

/// A baseline file as `check --baseline` and `baseline import` read it
/// ([`crate::history::baseline::Baseline::parse`], which validates), then what is shown of it:
/// `baseline show`'s text, and the fields that differ from this build's own fixture machine
/// (what a refusal of other hardware prints), all for a terminal.
pub fn baseline(text: &str) {
    use crate::history::baseline::Baseline;
    let b = match Baseline::parse(text) {
        Ok(b) => b,
        Err(why) => {
            assert!(terminal_safe(&why), "raw control character in {why:?}");
            return;
        }
    };
    let shown = b.render();
    assert!(terminal_safe(&shown), "raw control character in {shown:?}");
    let mut other = b.fingerprint.clone();
    other.cpus = other.cpus.wrapping_add(1);
    for line in b.fingerprint.differences(&other) {
        assert!(terminal_safe(&line), "raw control character in {line:?}");
    }
    let _ = b.fingerprint.key();
    let _ = b.to_json();
}
