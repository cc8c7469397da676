//! The e-mail to status page subscribers: for an incident update, a subject with the
//! page's name and the incident's name and status and a plain-text body with the
//! update's text and a link to the page; for a new PENDING subscription, the
//! confirmation mail with its confirmation link. Both end with an unsubscribe link.

use chrono::SecondsFormat;

use crate::service::store::{Incident, IncidentUpdate, StatusPage};

/// `[<page>] <incident>: <STATUS>`.
pub fn subject(page: &StatusPage, incident: &Incident, update: &IncidentUpdate) -> String {
    format!(
        "[{}] {}: {}",
        page.name,
        incident.name,
        update.status.as_str()
    )
}

/// The plain-text body of an incident update.
pub fn body(
    page: &StatusPage,
    link: &str,
    unsubscribe: &str,
    incident: &Incident,
    update: &IncidentUpdate,
) -> String {
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
         You get this e-mail because you subscribed to the status page \"{page}\".\n\
         Unsubscribe: {unsubscribe}\n",
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

/// `[<page>] Confirm your subscription`.
pub fn confirmation_subject(page: &StatusPage) -> String {
    format!("[{}] Confirm your subscription", page.name)
}

/// The plain-text body of a confirmation mail.
pub fn confirmation_body(
    page: &StatusPage,
    link: &str,
    confirm: &str,
    unsubscribe: &str,
) -> String {
    format!(
        "Please confirm that you want e-mails about incidents on the status page \"{page}\".\n\
         \n\
         Confirm: {confirm}\n\
         \n\
         Until you confirm, this page sends you nothing. If you did not ask for this,\n\
         ignore this e-mail, or remove your address at once:\n\
         Unsubscribe: {unsubscribe}\n\
         \n\
         Page: {link}\n",
        page = page.name,
    )
}

#[cfg(test)]
mod tests {
    use super::super::links::page_link;
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
        let text = body(&p, &link, "http://u/x", &incident, &update);
        assert!(text.starts_with(
            "Checkout is slow is IDENTIFIED (MAJOR incident).\n\nWe found the cause.\n"
        ));
        for line in [
            "Services: API, Web",
            "Posted:   2023-11-14T22:13:20.123Z",
            "Page:     http://127.0.0.1:8080/status/acme%20status",
            "Unsubscribe: http://u/x",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in {text}");
        }
        let text = confirmation_body(&p, &link, "http://c/1", "http://u/2");
        for line in [
            "Confirm: http://c/1",
            "Unsubscribe: http://u/2",
            "Page: http://127.0.0.1:8080/status/acme%20status",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in {text}");
        }
        assert_eq!(
            confirmation_subject(&p),
            "[Acme Status] Confirm your subscription"
        );
        assert_eq!(
            super::super::links::confirm_link("http://h:1/", &p, "osv_1"),
            "http://h:1/status/acme%20status/subscriptions/confirm?token=osv_1"
        );
        assert_eq!(
            super::super::links::unsubscribe_link("http://h:1", &page(Some("s.acme.com")), "osu_2"),
            "http://h:1/status/acme%20status/subscriptions/unsubscribe?token=osu_2"
        );
    }
}
