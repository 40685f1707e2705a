//! JSON: the whole document as `docs/schema.md` describes it, pretty-printed, with a final line
//! break.

use super::Exporter;
use crate::result::Report;

/// The results document as JSON: `--json` on stdout and `--output FILE.json`.
#[derive(Debug)]
pub(crate) struct JsonDocument;

impl Exporter for JsonDocument {
    fn export(&self, report: &Report) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(report).expect("a report always serialises");
        bytes.push(b'\n');
        bytes
    }
}
