//! Secret keys: generation, hashing and masking. A key is 32 random bytes in hex behind a
//! prefix (`opk_` for API keys, `opa_` for agent keys, `ops_` for status page keys,
//! `osv_`/`osu_` for the confirmation and unsubscribe links of status page
//! subscribers); only its SHA-256 is stored and the plaintext is shown once, at
//! creation (or, for links, in the one mail that carries it).

use rand::RngCore;
use sha2::{Digest, Sha256};

/// Prefix of API keys.
pub const API_KEY_PREFIX: &str = "opk_";
/// Prefix of agent (private location) keys.
pub const AGENT_KEY_PREFIX: &str = "opa_";
/// Prefix of status page keys (visitors of private pages).
pub const STATUS_PAGE_KEY_PREFIX: &str = "ops_";
/// Prefix of the tokens of subscription confirmation links.
pub const SUBSCRIPTION_VERIFY_PREFIX: &str = "osv_";
/// Prefix of the tokens of unsubscribe links.
pub const SUBSCRIPTION_UNSUBSCRIBE_PREFIX: &str = "osu_";
/// Longest key we bother hashing; anything longer cannot be one of ours.
pub const MAX_KEY_LEN: usize = 256;

/// A freshly generated key.
pub struct NewKey {
    /// Shown once to the caller, never stored.
    pub plaintext: String,
    pub hash: Vec<u8>,
    /// Safe to display: prefix and the last four characters.
    pub masked: String,
}

/// Generates a key with 256 random bits.
pub fn generate(prefix: &str) -> NewKey {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let plaintext = format!("{prefix}{}", hex::encode(bytes));
    NewKey {
        hash: hash(&plaintext),
        masked: mask(&plaintext),
        plaintext,
    }
}

/// SHA-256 of a presented key.
pub fn hash(key: &str) -> Vec<u8> {
    digest(key).to_vec()
}

/// SHA-256 of a presented key, as a fixed-size value (a map key of caches).
pub fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Whether `key` has the shape of a key made by [`generate`] with `prefix`: the prefix
/// and 64 lowercase hex digits. Anything else cannot be one of ours and is refused
/// without a lookup.
pub fn well_formed(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() == 64
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `opk_...1a2b`: the prefix and the last four characters.
pub fn mask(key: &str) -> String {
    let prefix = key.get(..4).unwrap_or("");
    let tail = key
        .char_indices()
        .rev()
        .nth(3)
        .and_then(|(i, _)| key.get(i..))
        .unwrap_or("");
    format!("{prefix}...{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_prefixed_random_and_masked() {
        let a = generate(API_KEY_PREFIX);
        let b = generate(API_KEY_PREFIX);
        assert_ne!(a.plaintext, b.plaintext);
        assert!(a.plaintext.starts_with("opk_"));
        assert_eq!(a.plaintext.len(), 4 + 64);
        assert_eq!(a.hash, hash(&a.plaintext));
        assert!(a.masked.starts_with("opk_..."));
        assert!(a.plaintext.ends_with(&a.masked[7..]));
        assert!(!a.masked.contains(&a.plaintext[4..20]));
        assert_eq!(mask("ab"), "...");
    }

    #[test]
    fn only_generated_shapes_are_well_formed() {
        let a = generate(API_KEY_PREFIX);
        assert!(well_formed(&a.plaintext, API_KEY_PREFIX));
        assert!(!well_formed(&a.plaintext, AGENT_KEY_PREFIX));
        assert!(!well_formed(&a.plaintext.to_uppercase(), API_KEY_PREFIX));
        assert!(!well_formed(&a.plaintext[..67], API_KEY_PREFIX));
        assert!(!well_formed(&format!("{}0", a.plaintext), API_KEY_PREFIX));
        assert!(!well_formed(
            &format!("opk_{}", "g".repeat(64)),
            API_KEY_PREFIX
        ));
        assert_eq!(digest(&a.plaintext).to_vec(), a.hash);
    }
}
