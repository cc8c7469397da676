//! Status pages as last looked up and rendered, by address.
//!
//! - An entry holds the page as a lookup found it, with the store's write generation
//!   read before that lookup ([`Store::write_generation`]). It is *current* while the
//!   generation is unchanged (nothing written since that its queries could miss). Its
//!   HTML is made again after [`MAX_AGE`] all the same (what depends on the clock alone,
//!   such as incident updates dated in the future, shows up at most that late), without
//!   looking the page up again. A lookup made while a write may be in progress (no
//!   generation) is never current.
//! - Its render is the HTML made from that lookup; a current entry with its render is
//!   served without a query. A busy page is rendered once per change, not once per
//!   visitor.
//! - One render at a time per page ([`PageCache::render_lock`]). A visitor who needs a
//!   render while another visitor's render of the page runs does not wait for it: it
//!   gets the latest render there is (made from an earlier lookup: stale by at most
//!   one render, and never older than [`MAX_STALE`]). A visitor who finds no render
//!   running renders itself, so a request made after a write has been answered sees
//!   that write unless another visitor is rendering right then.
//! - Whatever is served, the page's settings that decide what a visitor may see
//!   (private, keys, redirect) come from a current entry or a lookup made for this
//!   request: only the HTML body can be the previous render.
//!
//! [`Store::write_generation`]: crate::service::store::Store::write_generation

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use uuid::Uuid;

use crate::service::store::StatusPage;

/// Longest time a rendered page is served as current without rendering it again.
pub const MAX_AGE: Duration = Duration::from_secs(5);
/// Oldest render served while another visitor renders the page; a visitor finding only
/// an older one waits for the running render.
pub const MAX_STALE: Duration = Duration::from_secs(30);
/// Most pages kept; beyond it the cache starts over (unknown addresses are not kept).
pub const MAX_ENTRIES: usize = 1024;

/// What an entry holds for a visitor: the page and, if already made from this lookup,
/// its HTML.
#[derive(Clone)]
pub struct Cached {
    pub page: Arc<StatusPage>,
    pub body: Option<Bytes>,
    /// Which lookup this is (renders are kept with it).
    pub serial: u64,
    /// When that lookup began.
    pub at: Instant,
}

/// A render and the lookup it was made from.
struct Render {
    serial: u64,
    page_id: Uuid,
    /// When its lookup began.
    at: Instant,
    body: Bytes,
}

struct Entry {
    serial: u64,
    generation: Option<u64>,
    at: Instant,
    page: Arc<StatusPage>,
    /// The latest render of the page at this address (perhaps of an earlier lookup).
    render: Option<Render>,
}

impl Entry {
    fn is_current(&self, generation: Option<u64>) -> bool {
        generation.is_some() && self.generation == generation && self.at.elapsed() < MAX_AGE
    }

    fn cached(&self) -> Cached {
        Cached {
            page: self.page.clone(),
            body: self
                .render
                .as_ref()
                .filter(|r| r.serial == self.serial)
                .map(|r| r.body.clone()),
            serial: self.serial,
            at: self.at,
        }
    }
}

#[derive(Default)]
struct Entries {
    next_serial: u64,
    by_address: HashMap<String, Entry>,
}

/// Pages by address (`url:<url>` or `host:<domain>`).
#[derive(Default)]
pub struct PageCache {
    entries: Mutex<Entries>,
    /// One render at a time per address.
    renders: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl PageCache {
    /// The entry of `address` if it is current at `generation`. An entry of that
    /// generation older than [`MAX_AGE`] still holds the page as the database has it
    /// (nothing was written since): it becomes a new lookup without a query (a new
    /// serial, its render kept as the latest), so that only its HTML is made again.
    pub fn current(&self, address: &str, generation: Option<u64>) -> Option<Cached> {
        let mut entries = self.entries.lock().ok()?;
        let Entries {
            next_serial,
            by_address,
        } = &mut *entries;
        let e = by_address.get_mut(address)?;
        if generation.is_none() || e.generation != generation {
            return None;
        }
        if e.at.elapsed() >= MAX_AGE {
            *next_serial += 1;
            e.serial = *next_serial;
            e.at = Instant::now();
        }
        Some(e.cached())
    }

    /// Keeps the page a lookup that began at `generation` found at `address`; returns
    /// the entry to serve. An entry still current at that generation is kept as it is
    /// (the same state of the database, perhaps already rendered).
    pub fn put_page(
        &self,
        address: &str,
        generation: Option<u64>,
        at: Instant,
        page: Arc<StatusPage>,
    ) -> Cached {
        let Ok(mut entries) = self.entries.lock() else {
            return Cached {
                page,
                body: None,
                serial: u64::MAX,
                at,
            };
        };
        if let Some(e) = entries.by_address.get(address)
            && e.is_current(generation)
        {
            return e.cached();
        }
        if entries.by_address.len() >= MAX_ENTRIES && !entries.by_address.contains_key(address) {
            entries.by_address.clear();
        }
        entries.next_serial += 1;
        let serial = entries.next_serial;
        let render = entries.by_address.remove(address).and_then(|e| e.render);
        let entry = Entry {
            serial,
            generation,
            at,
            page,
            render,
        };
        let cached = entry.cached();
        entries.by_address.insert(address.to_owned(), entry);
        cached
    }

    /// Keeps the HTML rendered from lookup `serial` (which began at `at`), unless a
    /// render of a later lookup is there already.
    pub fn put_body(&self, address: &str, serial: u64, page_id: Uuid, at: Instant, body: Bytes) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if let Some(e) = entries.by_address.get_mut(address)
            && e.render.as_ref().is_none_or(|r| r.serial < serial)
        {
            e.render = Some(Render {
                serial,
                page_id,
                at,
                body,
            });
        }
    }

    /// The render of page `page_id` at `address` made from lookup `serial` or a later
    /// one (it shows everything that lookup would).
    pub fn rendered_since(&self, address: &str, serial: u64, page_id: Uuid) -> Option<Bytes> {
        let entries = self.entries.lock().ok()?;
        let r = entries.by_address.get(address)?.render.as_ref()?;
        (r.serial >= serial && r.page_id == page_id).then(|| r.body.clone())
    }

    /// The latest render of page `page_id` at `address`, if younger than [`MAX_STALE`]:
    /// what a visitor gets while another visitor renders the page.
    pub fn latest(&self, address: &str, page_id: Uuid) -> Option<Bytes> {
        let entries = self.entries.lock().ok()?;
        let r = entries.by_address.get(address)?.render.as_ref()?;
        (r.page_id == page_id && r.at.elapsed() < MAX_STALE).then(|| r.body.clone())
    }

    /// Forgets `address` (no page is there any more).
    pub fn forget(&self, address: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.by_address.remove(address);
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::store::StatusPage;

    /// A render of lookup `serial` of page `p` at `url:a` finishing now with `body`.
    fn finish(c: &PageCache, serial: u64, p: &StatusPage, body: &'static str) {
        c.put_body("url:a", serial, p.id, Instant::now(), Bytes::from(body));
    }

    fn page() -> Arc<StatusPage> {
        Arc::new(StatusPage {
            id: Uuid::new_v4(),
            account_id: Uuid::new_v4(),
            name: "Page".into(),
            url: "a".into(),
            custom_domain: None,
            description: None,
            settings: serde_json::Map::new(),
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
            cards: Vec::new(),
        })
    }

    #[test]
    fn entries_are_current_at_their_generation_only() {
        let c = PageCache::default();
        let p = page();
        let first = c.put_page("url:a", Some(2), Instant::now(), p.clone());
        assert!(first.body.is_none());
        finish(&c, first.serial, &p, "one");
        let hit = c.current("url:a", Some(2)).unwrap();
        assert_eq!(hit.body.as_deref(), Some(&b"one"[..]));
        assert!(c.current("url:a", Some(4)).is_none(), "written since");
        assert!(c.current("url:a", None).is_none(), "a write in progress");
        // The same generation looked up again keeps the rendered entry.
        let again = c.put_page("url:a", Some(2), Instant::now(), p.clone());
        assert_eq!(again.serial, first.serial);
        // A lookup without a generation is never current.
        let busy = c.put_page("url:a", None, Instant::now(), p.clone());
        assert!(busy.body.is_none());
        assert!(c.current("url:a", None).is_none());
    }

    #[test]
    fn an_old_entry_of_the_same_generation_is_rendered_again_without_a_lookup() {
        let c = PageCache::default();
        let p = page();
        let long_ago = Instant::now()
            .checked_sub(MAX_AGE + Duration::from_secs(1))
            .unwrap();
        let first = c.put_page("url:a", Some(2), long_ago, p.clone());
        c.put_body("url:a", first.serial, p.id, long_ago, Bytes::from("one"));
        let again = c.current("url:a", Some(2)).unwrap();
        assert_ne!(again.serial, first.serial);
        assert!(again.body.is_none(), "made again");
        assert_eq!(c.latest("url:a", p.id).as_deref(), Some(&b"one"[..]));
        // Visitors meanwhile see the same new lookup, not one each.
        assert_eq!(c.current("url:a", Some(2)).unwrap().serial, again.serial);
        assert!(c.current("url:a", Some(4)).is_none());
    }

    #[test]
    fn the_latest_render_stays_for_visitors_while_the_next_one_runs() {
        let c = PageCache::default();
        let p = page();
        let first = c.put_page("url:a", Some(2), Instant::now(), p.clone());
        finish(&c, first.serial, &p, "one");
        let second = c.put_page("url:a", Some(4), Instant::now(), p.clone());
        assert!(second.body.is_none());
        assert_eq!(c.latest("url:a", p.id).as_deref(), Some(&b"one"[..]));
        assert!(c.latest("url:a", Uuid::new_v4()).is_none(), "another page");
        assert!(c.rendered_since("url:a", second.serial, p.id).is_none());
        finish(&c, second.serial, &p, "two");
        assert_eq!(
            c.rendered_since("url:a", second.serial, p.id).as_deref(),
            Some(&b"two"[..])
        );
        // A render of an older lookup finishing late does not replace a newer one.
        finish(&c, first.serial, &p, "old");
        assert_eq!(c.latest("url:a", p.id).as_deref(), Some(&b"two"[..]));
        c.forget("url:a");
        assert!(c.latest("url:a", p.id).is_none());
    }
}
