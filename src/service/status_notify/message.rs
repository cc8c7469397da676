//! The e-mail a status page subscriber gets for an incident update: subject with the
//! page's name and the incident's name and status, plain-text body with the update's
//! text and a link to the page.

use chrono::SecondsFormat;

use crate::service::store::{Incident, IncidentUpdate, StatusPage};

/// Where a status page is read: `https://<custom domain>/` when it has one, else
/// `<public url>/status/<url>` (the path the page server is to answer on).
pub fn page_link(public_url: &str, page: &StatusPage) -> String {
    match page.custom_domain.as_deref().filter(|d| !d.is_empty()) {
        Some(domain) => format!("https://{domain}/"),
        None => format!(
            "{}/status/{}",
            public_url.trim_end_matches('/'),
            urlencoding_path(&page.url)
        ),
    }
}

/// Percent-encodes what is not safe in one path segment.
fn urlencoding_path(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `[<page>] <incident>: <STATUS>`.
pub fn subject(page: &StatusPage, incident: &Incident, update: &IncidentUpdate) -> String {
    format!(
        "[{}] {}: {}",
        page.name,
        incident.name,
        update.status.as_str()
    )
}

/// The plain-text body.
pub fn body(page: &StatusPage, link: &str, incident: &Incident, update: &IncidentUpdate) -> String {
    let services = incident
        .services
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{name} is {status} ({severity} incident).\n\
         \n\
         {description}\n\
         \n\
         Incident: {name}\n\
         Status:   {status}\n\
         Severity: {severity}\n\
         Services: {services}\n\
         Posted:   {posted}\n\
         Page:     {link}\n\
         \n\
         You get this e-mail because you subscribed to the status page \"{page}\".\n",
        name = incident.name,
        status = update.status.as_str(),
        severity = incident.severity.as_str(),
        description = update.description,
        posted = update
            .public_at
            .to_rfc3339_opts(SecondsFormat::Millis, true),
        page = page.name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::store::{IncidentSeverity, IncidentStatus, StatusService};
    use chrono::{TimeZone, Utc};
    use uuid::Uuid;

    fn page(custom_domain: Option<&str>) -> StatusPage {
        let t = Utc.timestamp_millis_opt(0).unwrap();
        StatusPage {
            id: Uuid::nil(),
            account_id: Uuid::nil(),
            name: "Acme Status".into(),
            url: "acme status".into(),
            custom_domain: custom_domain.map(str::to_owned),
            description: None,
            settings: Default::default(),
            created_at: t,
            updated_at: t,
            cards: Vec::new(),
        }
    }

    #[test]
    fn subject_body_and_link_name_page_incident_and_update() {
        let t = Utc.timestamp_millis_opt(1_700_000_000_123).unwrap();
        let service = |name: &str| StatusService {
            id: Uuid::nil(),
            account_id: Uuid::nil(),
            name: name.into(),
            created_at: t,
            updated_at: t,
        };
        let incident = Incident {
            id: Uuid::nil(),
            account_id: Uuid::nil(),
            name: "Checkout is slow".into(),
            severity: IncidentSeverity::Major,
            last_update_status: IncidentStatus::Identified,
            duration: None,
            created_at: t,
            updated_at: t,
            services: vec![service("API"), service("Web")],
            updates: Vec::new(),
        };
        let update = IncidentUpdate {
            id: Uuid::nil(),
            incident_id: Uuid::nil(),
            description: "We found the cause.".into(),
            status: IncidentStatus::Identified,
            public_at: t,
            notify_subscribers: true,
            created_at: t,
            updated_at: t,
        };
        let p = page(None);
        let link = page_link("http://127.0.0.1:8080/", &p);
        assert_eq!(link, "http://127.0.0.1:8080/status/acme%20status");
        assert_eq!(
            page_link("http://x", &page(Some("status.acme.com"))),
            "https://status.acme.com/"
        );
        assert_eq!(
            subject(&p, &incident, &update),
            "[Acme Status] Checkout is slow: IDENTIFIED"
        );
        let text = body(&p, &link, &incident, &update);
        assert!(text.starts_with(
            "Checkout is slow is IDENTIFIED (MAJOR incident).\n\nWe found the cause.\n"
        ));
        for line in [
            "Services: API, Web",
            "Posted:   2023-11-14T22:13:20.123Z",
            "Page:     http://127.0.0.1:8080/status/acme%20status",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in {text}");
        }
    }
}
