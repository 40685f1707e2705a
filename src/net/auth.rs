//! The shared key of `net serve` and its clients (and of the multi-node mode).
//!
//! A server started with a key sends every new control connection a random 32-byte nonce
//! ([`Nonce`]) in its first line; the client's hello carries
//! HMAC-SHA256(key, [`DOMAIN`] ‖ nonce ‖ message), where the message is the test it asks for,
//! so a proof is good for one connection and one test only and the key itself never crosses
//! the wire. The server recomputes the MAC and compares in constant time.
//!
//! A key comes from a file (`--key FILE` on `net` and `net serve`, else the file named by
//! `$PEAKBENCH_KEY_FILE`), or from bytes in memory ([`Key::from_bytes`], [`Key::random`]) so a
//! program can make a per-run key and hand it to a server it starts itself (the loopback child, on its stdin) and its client. A key
//! file must not be readable by group or others (like an ssh private key), and holds at least
//! [`MIN_KEY_BYTES`] bytes; a trailing newline is not part of the key.

use std::path::Path;

use anyhow::Result;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::UsageError;

/// The environment variable naming a key file, used when `--key` is not given.
pub(crate) const KEY_ENV: &str = "PEAKBENCH_KEY_FILE";
/// Shortest key accepted, in bytes.
pub(crate) const MIN_KEY_BYTES: usize = 16;
/// Longest key file read, in bytes.
const MAX_KEY_BYTES: u64 = 4096;
/// Prefix of every MAC'd message, so a MAC made here is never valid for another protocol.
pub(crate) const DOMAIN: &[u8] = b"peakbench net hello v2\0";

/// A shared key. Its bytes are never printed (`Debug` shows only its length).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({} bytes)", self.0.len())
    }
}

/// A server's challenge: 32 random bytes, new for every control connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Nonce(pub [u8; 32]);

impl Nonce {
    pub(crate) fn random() -> Nonce {
        Nonce(random_bytes())
    }

    pub(crate) fn to_hex(self) -> String {
        hex(&self.0)
    }

    pub(crate) fn from_hex(text: &str) -> Option<Nonce> {
        let bytes = unhex(text)?;
        Some(Nonce(bytes.try_into().ok()?))
    }
}

impl Key {
    /// A key from bytes in memory; at least [`MIN_KEY_BYTES`].
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Key> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(UsageError(format!(
                "--key: a key of {} bytes is too short: give at least {MIN_KEY_BYTES} (e.g. head -c 32 /dev/urandom > FILE)",
                bytes.len()
            ))
            .into());
        }
        Ok(Key(bytes.to_vec()))
    }

    /// 32 random bytes from the kernel: a per-run key for a server peakbench starts itself and its client.
    pub(crate) fn random() -> Key {
        Key(random_bytes().to_vec())
    }

    /// The key in `path`: the file's bytes without one trailing newline. Refused (exit 2)
    /// when the file is readable by group or others, not a regular file, too short or too long.
    pub(crate) fn from_file(path: &Path) -> Result<Key> {
        Key::load(path, "--key")
    }

    /// [`Key::from_file`], its refusals naming `source` (the flag or the variable).
    fn load(path: &Path, source: &str) -> Result<Key> {
        use std::io::Read;
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let shown = path.display();
        let usage =
            |why: String| -> anyhow::Error { UsageError(format!("{source}: {why}")).into() };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|e| {
                usage(format!(
                    "cannot read {shown}: {e}; give a readable key file"
                ))
            })?;
        let meta = file
            .metadata()
            .map_err(|e| usage(format!("cannot stat {shown}: {e}")))?;
        if !meta.is_file() {
            return Err(usage(format!("{shown} is not a regular file")));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(usage(format!(
                "{shown} is readable or writable by others (mode {:o}): chmod 600 {shown}",
                meta.mode() & 0o777
            )));
        }
        if meta.len() > MAX_KEY_BYTES {
            return Err(usage(format!(
                "{shown} holds {} bytes, more than a key ({MAX_KEY_BYTES} at most)",
                meta.len()
            )));
        }
        let mut bytes = Vec::new();
        file.take(MAX_KEY_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| usage(format!("cannot read {shown}: {e}")))?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        if bytes.len() < MIN_KEY_BYTES {
            return Err(usage(format!(
                "the key in {shown} is {} bytes, too short: give at least {MIN_KEY_BYTES} (e.g. head -c 32 /dev/urandom > FILE)",
                bytes.len()
            )));
        }
        Ok(Key(bytes))
    }

    /// The key as hex, for handing it to a child server over a pipe (never on a command line).
    pub(crate) fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// A key handed over by [`Key::to_hex`].
    pub(crate) fn from_hex(text: &str) -> Result<Key> {
        let bytes = unhex(text.trim())
            .ok_or_else(|| anyhow::anyhow!("the key handed to the server is not hex"))?;
        Key::from_bytes(&bytes)
    }

    /// The key of `--key FILE`, else of the file named by `$PEAKBENCH_KEY_FILE`, else none.
    pub(crate) fn resolve(flag: Option<&Path>) -> Result<Option<Key>> {
        if let Some(path) = flag {
            return Key::from_file(path).map(Some);
        }
        match std::env::var_os(KEY_ENV).filter(|v| !v.is_empty()) {
            Some(path) => Key::load(Path::new(&path), &format!("${KEY_ENV}")).map(Some),
            None => Ok(None),
        }
    }

    fn mac(&self, nonce: &Nonce, message: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(DOMAIN);
        mac.update(&nonce.0);
        mac.update(message);
        mac
    }

    /// The proof that the sender of `message` holds the key: HMAC-SHA256 over [`DOMAIN`],
    /// the nonce and the message, in hex.
    pub(crate) fn prove(&self, nonce: &Nonce, message: &[u8]) -> String {
        hex(&self.mac(nonce, message).finalize().into_bytes())
    }

    /// Whether `proof` (hex) is [`Key::prove`] of this nonce and message; compared in
    /// constant time.
    pub(crate) fn verify(&self, nonce: &Nonce, message: &[u8], proof: &str) -> bool {
        match unhex(proof) {
            Some(bytes) => self.mac(nonce, message).verify_slice(&bytes).is_ok(),
            None => false,
        }
    }
}

fn random_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: writes at most the remaining bytes into the rest of the buffer.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        if n > 0 {
            filled += n as usize;
        } else if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            panic!(
                "getrandom failed: {}; the kernel gives no random bytes",
                std::io::Error::last_os_error()
            );
        }
    }
    bytes
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 256 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_for_its_key_nonce_and_message_only() {
        let key = Key::from_bytes(b"0123456789abcdef-shared").unwrap();
        let other = Key::from_bytes(b"0123456789abcdef-other!").unwrap();
        let nonce = Nonce::random();
        let proof = key.prove(&nonce, b"test");
        assert_eq!(proof.len(), 64);
        assert!(key.verify(&nonce, b"test", &proof));
        assert!(!other.verify(&nonce, b"test", &proof));
        assert!(!key.verify(&Nonce::random(), b"test", &proof));
        assert!(!key.verify(&nonce, b"tesT", &proof));
        assert!(!key.verify(&nonce, b"test", &proof[..62]));
        assert!(!key.verify(&nonce, b"test", "zz"));
        assert!(!proof.contains(&hex(b"0123456789abcdef")));
        assert_eq!(Nonce::from_hex(&nonce.to_hex()), Some(nonce));
    }

    /// RFC 4231 test case 2 ("Jefe"), so the MAC is the standard HMAC-SHA256.
    #[test]
    fn the_mac_is_hmac_sha256() {
        let mut mac = Hmac::<Sha256>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_key_file_must_be_private_and_long_enough() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, b"0123456789abcdef\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(format!("{:#}", Key::from_file(&path).unwrap_err()).contains("chmod 600"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            Key::from_file(&path).unwrap(),
            Key::from_bytes(b"0123456789abcdef").unwrap()
        );
        std::fs::write(&path, b"short\n").unwrap();
        assert!(format!("{:#}", Key::from_file(&path).unwrap_err()).contains("too short"));
        assert_eq!(format!("{:?}", Key::random()), "Key(32 bytes)");
    }
}
