//! The HTML documents: a status page, the key form of a private page, "no such
//! page", and the notices of subscribers' links. Plain HTML with one inline style sheet; no script. Every string that comes
//! from a user goes through [`escape`](super::escape).

use std::collections::HashMap;
use std::fmt::Write;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::escape::{html, push, safe_link};
use super::state::{ServiceState, service_state};
use super::theme::{DefaultTheme, root_css};
use crate::service::store::{Incident, IncidentStatus, ServiceCheck, StatusPage};

/// Layout shared by every document; colors come from the theme's variables.
const BASE_CSS: &str = "\
*{box-sizing:border-box}\
body{margin:0;background:var(--body-bg);color:var(--body-fg);\
font:16px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif}\
header{background:var(--header-bg);color:var(--header-fg);border-bottom:1px solid var(--border)}\
.wrap{max-width:860px;margin:0 auto;padding:16px 20px}\
header .wrap{display:flex;align-items:center;gap:14px}\
header img{max-height:40px;max-width:200px}\
h1{font-size:1.5rem;margin:0;color:var(--header-fg)}\
h2{font-size:1.15rem;color:var(--title-fg);margin:28px 0 10px}\
h3{font-size:1rem;color:var(--title-fg);margin:0}\
a{color:var(--link-fg)}\
.muted,.description{color:var(--muted-fg)}\
.card,.incident,.banner{background:var(--card-bg);border:1px solid var(--border);\
border-radius:8px;margin:12px 0}\
.card h3{padding:12px 16px;border-bottom:1px solid var(--border)}\
.card ul{list-style:none;margin:0;padding:0}\
.card li{display:flex;justify-content:space-between;padding:10px 16px;\
border-bottom:1px solid var(--border)}\
.card li:last-child{border-bottom:0}\
.state{font-weight:600;white-space:nowrap}\
.state::before{content:'';display:inline-block;width:10px;height:10px;border-radius:50%;\
margin-right:8px;background:currentColor}\
.operational{color:#16A34A}.degraded{color:#D97706}.down{color:#DC2626}.unknown{color:#6B7280}\
.banner{padding:14px 16px;font-weight:600;color:var(--title-fg)}\
.incident{padding:12px 16px}\
.incident ol{list-style:none;margin:8px 0 0;padding:0 0 0 14px;border-left:2px solid var(--border)}\
.incident li{margin:0 0 10px}\
.badge{font-size:.75rem;font-weight:700;border:1px solid var(--border);border-radius:4px;\
padding:1px 6px;margin-left:8px;color:var(--muted-fg)}\
dl.legend{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;font-size:.9rem}\
dl.legend dd{margin:0;color:var(--muted-fg)}\
form{display:flex;gap:8px;margin-top:14px}\
input{flex:1;padding:8px 10px;border:1px solid var(--border);border-radius:6px;\
background:var(--card-bg);color:var(--body-fg)}\
button{padding:8px 14px;border:0;border-radius:6px;background:var(--button-bg);\
color:var(--button-fg);font-weight:600}\
.error{color:#DC2626}\
footer{font-size:.85rem;color:var(--muted-fg)}";

/// Incidents shown: the latest ones affecting the page's services.
pub const INCIDENTS_SHOWN: i64 = 20;

fn when(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

fn status_label(s: IncidentStatus) -> &'static str {
    match s {
        IncidentStatus::Investigating => "Investigating",
        IncidentStatus::Identified => "Identified",
        IncidentStatus::Monitoring => "Monitoring",
        IncidentStatus::Resolved => "Resolved",
    }
}

fn link<'a>(settings: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    settings
        .get(name)
        .and_then(Value::as_str)
        .and_then(safe_link)
}

/// `<!doctype html>` up to `<body>`.
fn head(out: &mut String, title: &str, settings: &Map<String, Value>) {
    out.push_str("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    out.push_str("<meta name=\"referrer\" content=\"no-referrer\">");
    let _ = write!(out, "<title>{}</title>", html(title));
    if let Some(icon) = link(settings, "favicon") {
        let _ = write!(out, "<link rel=\"icon\" href=\"{}\">", html(icon));
    }
    let _ = write!(
        out,
        "<style>{}{BASE_CSS}</style></head><body>",
        root_css(settings)
    );
}

/// The header with logo (dark variant where the theme is dark) and the page's name.
fn header(out: &mut String, page: &StatusPage) {
    out.push_str("<header><div class=\"wrap\">");
    let logo = link(&page.settings, "logo");
    let logo_dark = link(&page.settings, "logoDark");
    let alt = html(&page.name);
    match (DefaultTheme::of(&page.settings), logo, logo_dark) {
        (DefaultTheme::Dark, _, Some(dark)) | (DefaultTheme::Dark, Some(dark), None) => {
            let _ = write!(
                out,
                "<img class=\"logo\" src=\"{}\" alt=\"{alt}\">",
                html(dark)
            );
        }
        (DefaultTheme::Auto, Some(light), Some(dark)) => {
            let _ = write!(
                out,
                "<picture><source media=\"(prefers-color-scheme: dark)\" srcset=\"{}\">\
                 <img class=\"logo\" src=\"{}\" alt=\"{alt}\"></picture>",
                html(dark),
                html(light)
            );
        }
        (_, Some(light), _) | (DefaultTheme::Auto, None, Some(light)) => {
            let _ = write!(
                out,
                "<img class=\"logo\" src=\"{}\" alt=\"{alt}\">",
                html(light)
            );
        }
        _ => {}
    }
    let _ = write!(out, "<h1>{alt}</h1></div></header>");
}

/// The sentence over the cards.
fn banner(states: &[ServiceState], active_incidents: usize) -> (&'static str, &'static str) {
    let worst = states.iter().copied().max();
    match worst {
        Some(ServiceState::Down) => ("down", "Some services are down"),
        Some(ServiceState::Degraded) => ("degraded", "Some services are degraded"),
        _ if active_incidents > 0 => ("degraded", "There is an ongoing incident"),
        Some(ServiceState::Unknown) if !states.contains(&ServiceState::Operational) => {
            ("unknown", "No service has reported its state yet")
        }
        Some(ServiceState::Unknown) => (
            "operational",
            "All services that report a state are operational",
        ),
        Some(ServiceState::Operational) => ("operational", "All systems operational"),
        None => ("unknown", "This page shows no services yet"),
    }
}

fn incident(out: &mut String, i: &Incident, now: DateTime<Utc>) {
    let _ = write!(
        out,
        "<article class=\"incident\" data-status=\"{}\"><h3>{}<span class=\"badge\">{}</span>\
         <span class=\"badge\">{}</span></h3><div class=\"muted\">Opened {}",
        i.last_update_status.as_str().to_ascii_lowercase(),
        html(&i.name),
        i.severity.as_str(),
        status_label(i.last_update_status),
        when(i.created_at)
    );
    if !i.services.is_empty() {
        out.push_str(" · affects ");
        for (n, s) in i.services.iter().enumerate() {
            if n > 0 {
                out.push_str(", ");
            }
            push(out, &s.name);
        }
    }
    out.push_str("</div>");
    let shown: Vec<_> = i.updates.iter().filter(|u| u.public_at <= now).collect();
    if !shown.is_empty() {
        out.push_str("<ol>");
        for u in shown {
            let _ = write!(
                out,
                "<li><strong>{}</strong> <span class=\"muted\">{}</span><div>{}</div></li>",
                status_label(u.status),
                when(u.public_at),
                html(&u.description)
            );
        }
        out.push_str("</ol>");
    }
    out.push_str("</article>");
}

/// A whole status page.
pub fn page(
    page: &StatusPage,
    incidents: &[Incident],
    checks: &[ServiceCheck],
    now: DateTime<Utc>,
) -> String {
    let mut by_service: HashMap<Uuid, Vec<&ServiceCheck>> = HashMap::new();
    for c in checks {
        by_service.entry(c.service_id).or_default().push(c);
    }
    let state_of = |id: Uuid| service_state(by_service.get(&id).into_iter().flatten().copied());
    let states: Vec<ServiceState> = page.service_ids().into_iter().map(state_of).collect();
    let (active, recent): (Vec<&Incident>, Vec<&Incident>) = incidents
        .iter()
        .partition(|i| i.last_update_status != IncidentStatus::Resolved);

    let mut out = String::with_capacity(16 * 1024);
    head(&mut out, &page.name, &page.settings);
    header(&mut out, page);
    out.push_str("<main class=\"wrap\">");
    if let Some(d) = &page.description {
        let _ = write!(out, "<p class=\"description\">{}</p>", html(d));
    }
    let (class, text) = banner(&states, active.len());
    let _ = write!(
        out,
        "<div class=\"banner\" data-state=\"{class}\"><span class=\"state {class}\">{text}</span></div>"
    );
    if !active.is_empty() {
        out.push_str("<section id=\"active-incidents\"><h2>Active incidents</h2>");
        for i in &active {
            incident(&mut out, i, now);
        }
        out.push_str("</section>");
    }
    out.push_str("<section id=\"services\">");
    for card in &page.cards {
        let _ = write!(
            out,
            "<section class=\"card\"><h3>{}</h3><ul>",
            html(&card.name)
        );
        for s in &card.services {
            let state = state_of(s.id);
            let _ = write!(
                out,
                "<li data-service=\"{}\"><span class=\"service\">{}</span>\
                 <span class=\"state {}\">{}</span></li>",
                s.id,
                html(&s.name),
                state.as_str(),
                state.label()
            );
        }
        out.push_str("</ul></section>");
    }
    out.push_str(
        "</section><section id=\"legend\"><h2>What the states mean</h2><dl class=\"legend\">",
    );
    for s in ServiceState::ALL {
        let _ = write!(
            out,
            "<dt class=\"state {}\">{}</dt><dd>{}</dd>",
            s.as_str(),
            s.label(),
            s.meaning()
        );
    }
    out.push_str("</dl></section>");
    out.push_str("<section id=\"recent-incidents\"><h2>Recent incidents</h2>");
    if recent.is_empty() {
        out.push_str("<p class=\"muted\">No recent incidents.</p>");
    }
    for i in &recent {
        incident(&mut out, i, now);
    }
    let _ = write!(
        out,
        "</section><footer><p>Updated {}</p></footer></main></body></html>",
        when(now)
    );
    out
}

/// The key form of a private page: its colors, nothing of its content (not even its
/// name).
pub fn key_form(page: &StatusPage, action: &str, rejected: bool) -> String {
    let mut out = String::with_capacity(4096);
    head(&mut out, "Private status page", &page.settings);
    out.push_str("<header><div class=\"wrap\"><h1>Private status page</h1></div></header>");
    out.push_str("<main class=\"wrap\"><section class=\"card\" style=\"padding:16px\">");
    out.push_str("<h2 style=\"margin-top:0\">This status page is private</h2>");
    out.push_str("<p>Enter one of the page's access keys to see it.</p>");
    if rejected {
        out.push_str("<p class=\"error\" role=\"alert\">That key is not valid for this page.</p>");
    }
    let _ = write!(
        out,
        "<form method=\"get\" action=\"{}\"><input name=\"key\" type=\"password\" \
         autocomplete=\"off\" aria-label=\"Access key\" placeholder=\"Access key\" required>\
         <button type=\"submit\">View status</button></form>",
        html(action)
    );
    out.push_str("</section></main></body></html>");
    out
}

/// What a subscriber's link did (or why it did nothing): `heading` and `text` (plain,
/// escaped here) under the page's header and colors, and a link back to the page.
pub fn notice(
    page: Option<&StatusPage>,
    heading: &str,
    text: &str,
    page_link: Option<&str>,
) -> String {
    let mut out = String::with_capacity(4096);
    let settings = page.map(|p| &p.settings);
    let empty = Map::new();
    head(&mut out, heading, settings.unwrap_or(&empty));
    match page {
        Some(page) => header(&mut out, page),
        None => out.push_str("<header><div class=\"wrap\"><h1>Status page</h1></div></header>"),
    }
    let _ = write!(
        out,
        "<main class=\"wrap\"><section class=\"card notice\" style=\"padding:16px\">\
         <h2 style=\"margin-top:0\">{}</h2><p>{}</p>",
        html(heading),
        html(text)
    );
    if let Some(link) = page_link.and_then(safe_link) {
        let _ = write!(
            out,
            "<p><a href=\"{}\">Go to the status page</a></p>",
            html(link)
        );
    }
    out.push_str("</section></main></body></html>");
    out
}

/// No page at this address.
pub fn not_found() -> String {
    let mut out = String::with_capacity(2048);
    head(&mut out, "Status page not found", &Map::new());
    out.push_str(
        "<main class=\"wrap\"><h2>Status page not found</h2>\
         <p class=\"muted\">There is no status page at this address.</p></main></body></html>",
    );
    out
}

/// Something went wrong on our side (details are logged, not shown).
pub fn unavailable() -> String {
    let mut out = String::with_capacity(2048);
    head(&mut out, "Status page unavailable", &Map::new());
    out.push_str(
        "<main class=\"wrap\"><h2>Status page unavailable</h2>\
         <p class=\"muted\">Please try again in a moment.</p></main></body></html>",
    );
    out
}
