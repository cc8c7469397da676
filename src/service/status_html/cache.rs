//! Rendered status pages, kept while nothing was written to the database.
//!
//! An entry remembers the store's write generation read before its page was looked up;
//! it is served only while the generation is unchanged (no write since, so the same
//! queries would give the same answer) and for at most [`MAX_AGE`] (what depends on the
//! clock alone, such as incident updates dated in the future, shows up at most that
//! late). A busy page is then rendered once per change instead of once per visitor, and
//! visitors arriving while it renders wait for that render ([`PageCache::render_lock`])
//! instead of rendering it again each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;

use crate::service::store::StatusPage;

/// Longest time a rendered page is served without rendering it again.
pub const MAX_AGE: Duration = Duration::from_secs(5);
/// Most pages kept; beyond it the cache starts over (unknown addresses are not kept).
pub const MAX_ENTRIES: usize = 1024;

/// A page found by its address, and its rendered HTML once rendered.
#[derive(Clone)]
pub struct Cached {
    pub page: Arc<StatusPage>,
    pub body: Option<Bytes>,
}

struct Entry {
    generation: u64,
    at: Instant,
    cached: Cached,
}

/// Pages by address (`url:<url>` or `host:<domain>`).
#[derive(Default)]
pub struct PageCache {
    entries: Mutex<HashMap<String, Entry>>,
    /// One render at a time per address.
    renders: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl PageCache {
    /// The entry of `address` if it is still current at `generation`.
    pub fn get(&self, address: &str, generation: u64) -> Option<Cached> {
        let entries = self.entries.lock().ok()?;
        let e = entries.get(address)?;
        (e.generation == generation && e.at.elapsed() < MAX_AGE).then(|| e.cached.clone())
    }

    /// The lock held while the page at `address` renders.
    pub fn render_lock(&self, address: &str) -> Arc<tokio::sync::Mutex<()>> {
        let Ok(mut renders) = self.renders.lock() else {
            return Arc::default();
        };
        if renders.len() >= MAX_ENTRIES && !renders.contains_key(address) {
            // Only locks nobody holds or waits for go.
            renders.retain(|_, lock| Arc::strong_count(lock) > 1);
        }
        renders.entry(address.to_owned()).or_default().clone()
    }

    /// Keeps the page found at `address` by a lookup that started at `generation`.
    pub fn put_page(&self, address: &str, generation: u64, page: Arc<StatusPage>) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(address) {
            entries.clear();
        }
        entries.insert(
            address.to_owned(),
            Entry {
                generation,
                at: Instant::now(),
                cached: Cached { page, body: None },
            },
        );
    }

    /// Keeps the rendered HTML of the page at `address`, if the entry is the one of
    /// `generation` (a write since then makes the render worthless).
    pub fn put_body(&self, address: &str, generation: u64, body: Bytes) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if let Some(e) = entries.get_mut(address)
            && e.generation == generation
        {
            e.cached.body = Some(body);
        }
    }
}
