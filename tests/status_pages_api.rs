//! `/v1/status-pages` against the real service over HTTP: CRUD of pages (with cards),
//! services, incidents, incident updates and subscriptions; cursor paging; the spec's
//! limits (400 naming the field); account isolation; unknown ids; malformed bodies;
//! queued notifications; the service -> check link; and a real `outpost serve` process
//! keeping it all across a restart.

mod serve_support;
mod service_support;

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use outpost::service::admin::Tenant;
use service_support::{TestService, error_body};

fn colors(value: &str) -> Value {
    let names = [
        "bodyBackgroundColor",
        "headerBackgroundColor",
        "headerFontColor",
        "titleFontColor",
        "bodyFontColor",
        "bodyFontColorMuted",
        "navigationFontColor",
        "linkFontColor",
        "cardBackgroundColor",
        "borderColor",
        "primaryButtonBackgroundColor",
        "primaryButtonFontColor",
    ];
    Value::Object(
        names
            .iter()
            .map(|n| (n.to_string(), json!(value)))
            .collect(),
    )
}

/// A request as `tenant`.
fn as_tenant(svc: &TestService, tenant: &Tenant, method: Method, path: &str) -> RequestBuilder {
    svc.http
        .request(method, format!("{}{path}", svc.base))
        .bearer_auth(&tenant.api_key)
        .header("x-service-account", tenant.account.id.to_string())
}

async fn send_json(req: RequestBuilder, body: &Value) -> (StatusCode, Value) {
    let resp = req.json(body).send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn get_json(svc: &TestService, path: &str) -> (StatusCode, Value) {
    let resp = svc.api(Method::GET, path).send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn create_service(svc: &TestService, name: &str) -> Value {
    let (status, body) = send_json(
        svc.api(Method::POST, "/v1/status-pages/services"),
        &json!({"name": name}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn id_of(v: &Value) -> String {
    v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {v}"))
        .to_owned()
}

/// An incident service reference of this tenant.
fn service_ref(svc: &TestService, service: &Value) -> Value {
    json!({"id": service["id"], "name": service["name"], "accountId": svc.tenant.account.id})
}

fn page_body(url: &str, cards: Value) -> Value {
    json!({"name": format!("Page {url}"), "url": url, "cards": cards})
}

async fn create_page(svc: &TestService, url: &str, cards: Value) -> Value {
    let (status, body) = send_json(
        svc.api(Method::POST, "/v1/status-pages"),
        &page_body(url, cards),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

fn incident_body(svc: &TestService, services: &[&Value], update: Value) -> Value {
    json!({
        "name": "Checkout is slow",
        "severity": "MAJOR",
        "services": services.iter().map(|s| service_ref(svc, s)).collect::<Vec<_>>(),
        "incidentUpdates": [update],
    })
}

async fn create_incident(svc: &TestService, services: &[&Value], update: Value) -> Value {
    let (status, body) = send_json(
        svc.api(Method::POST, "/v1/status-pages/incidents"),
        &incident_body(svc, services, update),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

/// Sends `body` and expects a 400 whose message starts with `field`.
async fn expect_invalid(req: RequestBuilder, body: &Value, field: &str) {
    let resp = req.json(body).send().await.unwrap();
    let err = error_body(resp, StatusCode::BAD_REQUEST).await;
    let message = err["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("{field}:")),
        "expected an error naming {field}, got {message:?} for {body}"
    );
}

fn time_of(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn services_crud() {
    let svc = TestService::start().await;
    let created = create_service(&svc, "API").await;
    let id = id_of(&created);
    assert_eq!(created["name"], "API");
    assert_eq!(created["accountId"], svc.tenant.account.id.to_string());
    assert!(created["created_at"].is_string());

    let (status, got) = get_json(&svc, &format!("/v1/status-pages/services/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, created);

    let (status, renamed) = send_json(
        svc.api(Method::PUT, &format!("/v1/status-pages/services/{id}")),
        &json!({"name": "Public API"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(renamed["name"], "Public API");
    assert_eq!(renamed["id"], created["id"]);

    create_service(&svc, "Website").await;
    let (_, list) = get_json(&svc, "/v1/status-pages/services").await;
    assert_eq!(list["length"], 2);
    assert_eq!(list["nextId"], Value::Null);
    let names: Vec<&str> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Public API", "Website"]);
    let (_, first) = get_json(&svc, "/v1/status-pages/services?limit=1").await;
    assert_eq!(first["length"], 1);
    assert!(first["nextId"].is_string());
    let (_, all) = get_json(&svc, "/v1/status-pages/services?limit=1&paginated=false").await;
    assert_eq!(all["length"], 2);

    let url = "/v1/status-pages/services";
    expect_invalid(svc.api(Method::POST, url), &json!({}), "name").await;
    expect_invalid(svc.api(Method::POST, url), &json!({"name": "  "}), "name").await;
    expect_invalid(
        svc.api(Method::POST, url),
        &json!({"name": "x".repeat(256)}),
        "name",
    )
    .await;

    let resp = svc
        .api(Method::DELETE, &format!("/v1/status-pages/services/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = svc
        .api(Method::GET, &format!("/v1/status-pages/services/{id}"))
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

#[tokio::test]
async fn pages_crud_with_cards() {
    let svc = TestService::start().await;
    let api = create_service(&svc, "API").await;
    let web = create_service(&svc, "Website").await;
    let db = create_service(&svc, "Database").await;
    let body = json!({
        "name": "Acme status",
        "url": "Acme-Status",
        "description": "How Acme is doing",
        "customDomain": "Status.Acme.example",
        "themeColors": {"light": colors("#fff"), "dark": colors("#1a2b3c")},
        "logo": "https://acme.example/logo.png",
        "defaultTheme": "DARK",
        "cards": [
            {"name": "Core", "services": [{"id": api["id"]}, {"id": web["id"]}]},
            {"name": "Storage", "services": [{"id": db["id"]}]},
        ],
    });
    let (status, page) = send_json(svc.api(Method::POST, "/v1/status-pages"), &body).await;
    assert_eq!(status, StatusCode::CREATED, "{page}");
    let id = id_of(&page);
    assert_eq!(page["url"], "acme-status");
    assert_eq!(page["customDomain"], "status.acme.example");
    assert_eq!(page["themeColors"]["light"]["bodyBackgroundColor"], "#FFF");
    assert_eq!(page["themeColors"]["dark"]["borderColor"], "#1A2B3C");
    assert_eq!(page["defaultTheme"], "DARK");
    assert_eq!(page["isPrivate"], false);
    assert_eq!(page["logoDark"], Value::Null);
    let cards = page["cards"].as_array().unwrap();
    assert_eq!(cards.len(), 2);
    assert_eq!(cards[0]["name"], "Core");
    let shown: Vec<&Value> = cards[0]["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["name"])
        .collect();
    assert_eq!(shown, [&json!("API"), &json!("Website")]);
    assert_eq!(cards[1]["services"][0]["id"], db["id"]);

    let (status, got) = get_json(&svc, &format!("/v1/status-pages/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["cards"], page["cards"]);
    assert_eq!(got["name"], "Acme status");

    // Defaults of a minimal page.
    let minimal = create_page(&svc, "minimal", json!([])).await;
    assert_eq!(minimal["defaultTheme"], "AUTO");
    assert_eq!(minimal["isPrivate"], false);
    assert_eq!(minimal["themeColors"], Value::Null);
    assert_eq!(minimal["cards"], json!([]));

    // PUT replaces: the first card keeps its id (and creation time), the second is
    // dropped, a new card appears.
    let core_id = cards[0]["id"].clone();
    let replace = json!({
        "name": "Acme",
        "url": "acme-status",
        "isPrivate": true,
        "cards": [
            {"id": core_id, "name": "Core services", "services": [{"id": web["id"]}]},
            {"name": "New", "services": []},
        ],
    });
    let (status, updated) = send_json(
        svc.api(Method::PUT, &format!("/v1/status-pages/{id}")),
        &replace,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["name"], "Acme");
    assert_eq!(updated["isPrivate"], true);
    assert_eq!(updated["customDomain"], Value::Null);
    assert_eq!(updated["themeColors"], Value::Null);
    let new_cards = updated["cards"].as_array().unwrap();
    assert_eq!(new_cards.len(), 2);
    assert_eq!(new_cards[0]["id"], core_id);
    assert_eq!(new_cards[0]["created_at"], cards[0]["created_at"]);
    assert_eq!(new_cards[0]["name"], "Core services");
    assert_eq!(new_cards[0]["services"].as_array().unwrap().len(), 1);
    assert_ne!(new_cards[1]["id"], cards[1]["id"]);

    // A PUT as a client of the reference sends it (no isPrivate: its bodies have none)
    // keeps the page private; an explicit false makes it public.
    let mut renamed = replace.clone();
    renamed["name"] = json!("Acme (renamed)");
    renamed.as_object_mut().unwrap().remove("isPrivate");
    let (status, kept) = send_json(
        svc.api(Method::PUT, &format!("/v1/status-pages/{id}")),
        &renamed,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{kept}");
    assert_eq!(kept["name"], "Acme (renamed)");
    assert_eq!(kept["isPrivate"], true);
    renamed["isPrivate"] = json!(false);
    let (status, public) = send_json(
        svc.api(Method::PUT, &format!("/v1/status-pages/{id}")),
        &renamed,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{public}");
    assert_eq!(public["isPrivate"], false);
    renamed.as_object_mut().unwrap().remove("isPrivate");
    let (_, still) = send_json(
        svc.api(Method::PUT, &format!("/v1/status-pages/{id}")),
        &renamed,
    )
    .await;
    assert_eq!(still["isPrivate"], false);

    // A card id of another page is refused.
    let other_card =
        json!({"name": "x", "url": "acme-status", "cards": [{"id": Uuid::new_v4(), "name": "c"}]});
    expect_invalid(
        svc.api(Method::PUT, &format!("/v1/status-pages/{id}")),
        &other_card,
        "cards",
    )
    .await;

    // A deleted service leaves the cards that showed it.
    let resp = svc
        .api(
            Method::DELETE,
            &format!("/v1/status-pages/services/{}", id_of(&web)),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let (_, after) = get_json(&svc, &format!("/v1/status-pages/{id}")).await;
    assert_eq!(after["cards"][0]["services"], json!([]));

    let resp = svc
        .api(Method::DELETE, &format!("/v1/status-pages/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let (status, _) = get_json(&svc, &format!("/v1/status-pages/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    svc.stop().await;
}

#[tokio::test]
async fn page_fields_are_validated() {
    let svc = TestService::start().await;
    let api = create_service(&svc, "API").await;
    let post = || svc.api(Method::POST, "/v1/status-pages");
    let base = page_body("valid", json!([]));
    let with = |field: &str, value: Value| {
        let mut b = base.clone();
        b[field] = value;
        b
    };
    expect_invalid(post(), &json!({"name": "n", "url": "u"}), "cards").await;
    expect_invalid(post(), &json!({"url": "u", "cards": []}), "name").await;
    expect_invalid(post(), &json!({"name": "n", "cards": []}), "url").await;
    expect_invalid(post(), &with("url", json!("not a label!")), "url").await;
    expect_invalid(post(), &with("url", json!("x".repeat(64))), "url").await;
    expect_invalid(
        post(),
        &with("description", json!("d".repeat(501))),
        "description",
    )
    .await;
    expect_invalid(
        post(),
        &with("customDomain", json!("nodot")),
        "customDomain",
    )
    .await;
    expect_invalid(
        post(),
        &with("logo", json!("ftp://x.example/l.png")),
        "logo",
    )
    .await;
    expect_invalid(post(), &with("defaultTheme", json!("PINK")), "defaultTheme").await;
    expect_invalid(post(), &with("isPrivate", json!("yes")), "isPrivate").await;
    expect_invalid(
        post(),
        &with("themeColors", json!({"light": colors("#fff")})),
        "themeColors.dark",
    )
    .await;
    let mut bad = colors("#fff");
    bad["borderColor"] = json!("red");
    expect_invalid(
        post(),
        &with("themeColors", json!({"light": bad, "dark": colors("#000")})),
        "themeColors.light.borderColor",
    )
    .await;
    expect_invalid(
        post(),
        &with("cards", json!([{"services": []}])),
        "cards[0].name",
    )
    .await;
    expect_invalid(
        post(),
        &with("cards", json!([{"name": "c", "services": [{}]}])),
        "cards[0].services[0].id",
    )
    .await;
    expect_invalid(
        post(),
        &with(
            "cards",
            json!([{"name": "c", "services": [{"id": api["id"]}, {"id": Uuid::new_v4()}]}]),
        ),
        "cards[0].services[1].id",
    )
    .await;
    expect_invalid(
        post(),
        &with(
            "cards",
            json!([{"name": "c", "services": [{"id": api["id"]}, {"id": api["id"]}]}]),
        ),
        "cards[0].services[1].id",
    )
    .await;
    let too_many: Vec<Value> = (0..51).map(|i| json!({"name": format!("c{i}")})).collect();
    expect_invalid(post(), &with("cards", json!(too_many)), "cards").await;

    // The url and the custom domain are unique: 409 naming the field.
    create_page(&svc, "taken", json!([])).await;
    let (status, err) = send_json(post(), &page_body("taken", json!([]))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert!(
        err["message"].as_str().unwrap().starts_with("url:"),
        "{err}"
    );
    let (status, _) = send_json(post(), &with("customDomain", json!("status.acme.example"))).await;
    assert_eq!(status, StatusCode::CREATED);
    let mut again = page_body("other", json!([]));
    again["customDomain"] = json!("STATUS.acme.example");
    let (status, err) = send_json(post(), &again).await;
    assert_eq!(status, StatusCode::CONFLICT, "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("customDomain:")
    );
    svc.stop().await;
}

#[tokio::test]
async fn status_pages_are_paged_with_limit_and_next_id() {
    let svc = TestService::start().await;
    let mut created = Vec::new();
    for i in 0..7 {
        created.push(id_of(
            &create_page(&svc, &format!("page-{i}"), json!([])).await,
        ));
    }
    let (_, all) = get_json(&svc, "/v1/status-pages").await;
    assert_eq!(all["length"], 7);
    assert_eq!(all["nextId"], Value::Null);
    let entry = &all["entries"][0];
    assert_eq!(entry["incidents"], json!([]));
    assert_eq!(entry["keys"], json!([]));
    assert_eq!(entry["accountId"], svc.tenant.account.id.to_string());

    let mut seen = Vec::new();
    let mut lengths = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let path = match &next {
            Some(n) => format!("/v1/status-pages?limit=3&nextId={n}"),
            None => "/v1/status-pages?limit=3".to_owned(),
        };
        let (status, page) = get_json(&svc, &path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let entries = page["entries"].as_array().unwrap();
        assert_eq!(page["length"], entries.len());
        lengths.push(entries.len());
        seen.extend(entries.iter().map(id_of));
        match page["nextId"].as_str() {
            Some(n) => next = Some(n.to_owned()),
            None => break,
        }
        assert!(lengths.len() < 10, "paging does not end");
    }
    assert_eq!(lengths, [3, 3, 1]);
    assert_eq!(seen, created, "every page once, in creation order");

    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=ten", "limit"),
        ("nextId=nope", "nextId"),
    ] {
        let resp = svc
            .api(Method::GET, &format!("/v1/status-pages?{query}"))
            .send()
            .await
            .unwrap();
        let err = error_body(resp, StatusCode::BAD_REQUEST).await;
        assert!(err["message"].as_str().unwrap().starts_with(field), "{err}");
    }
    // A nextId that is no page of the account.
    let resp = svc
        .api(
            Method::GET,
            &format!("/v1/status-pages?nextId={}", Uuid::new_v4()),
        )
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;
    let (_, max) = get_json(&svc, "/v1/status-pages?limit=100").await;
    assert_eq!(max["length"], 7);
    svc.stop().await;
}

#[tokio::test]
async fn incidents_and_incident_updates() {
    let svc = TestService::start().await;
    let api = create_service(&svc, "API").await;
    let web = create_service(&svc, "Website").await;
    let page = create_page(
        &svc,
        "acme",
        json!([{"name": "All", "services": [{"id": api["id"]}]}]),
    )
    .await;

    let before = Utc::now() - chrono::Duration::seconds(1);
    let incident = create_incident(
        &svc,
        &[&api, &web],
        json!({"description": "Looking into it"}),
    )
    .await;
    let after = Utc::now() + chrono::Duration::seconds(1);
    let id = id_of(&incident);
    assert_eq!(incident["name"], "Checkout is slow");
    assert_eq!(incident["severity"], "MAJOR");
    assert_eq!(incident["lastUpdateStatus"], "INVESTIGATING");
    assert_eq!(incident["duration"], Value::Null);
    assert_eq!(incident["services"].as_array().unwrap().len(), 2);
    assert_eq!(incident["services"][1]["name"], "Website");
    let first = &incident["incidentUpdates"][0];
    assert_eq!(first["description"], "Looking into it");
    assert_eq!(first["status"], "INVESTIGATING");
    assert_eq!(first["notifySubscribers"], false);
    let public = time_of(&first["publicIncidentUpdateDate"]);
    assert!(
        public > before && public < after,
        "{public} defaults to now"
    );

    // The page list shows the incident on the page showing one of its services.
    let (_, pages) = get_json(&svc, "/v1/status-pages").await;
    assert_eq!(pages["entries"][0]["id"], page["id"]);
    assert_eq!(pages["entries"][0]["incidents"][0]["id"], incident["id"]);

    // A later update moves the incident's status.
    let (status, resolved) = send_json(
        svc.api(
            Method::POST,
            &format!("/v1/status-pages/incidents/{id}/incident-updates"),
        ),
        &json!({"description": "Fixed", "status": "RESOLVED",
                "publicIncidentUpdateDate": "2099-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{resolved}");
    assert_eq!(resolved["status"], "RESOLVED");
    assert_eq!(
        time_of(&resolved["publicIncidentUpdateDate"]),
        "2099-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
    );
    let update_id = id_of(&resolved);
    let (_, got) = get_json(&svc, &format!("/v1/status-pages/incidents/{id}")).await;
    assert_eq!(got["lastUpdateStatus"], "RESOLVED");
    assert_eq!(got["incidentUpdates"].as_array().unwrap().len(), 2);

    // An update without status takes the incident's current one.
    let (status, plain) = send_json(
        svc.api(
            Method::POST,
            &format!("/v1/status-pages/incidents/{id}/incident-updates"),
        ),
        &json!({"description": "Post-mortem follows"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(plain["status"], "RESOLVED");

    let (status, updates) = get_json(
        &svc,
        &format!("/v1/status-pages/incidents/{id}/incident-updates"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let descriptions: Vec<&str> = updates
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["description"].as_str().unwrap())
        .collect();
    assert_eq!(
        descriptions,
        ["Fixed", "Post-mortem follows", "Looking into it"],
        "newest first"
    );

    let path = format!("/v1/status-pages/incidents/{id}/incident-updates/{update_id}");
    let (status, one) = get_json(&svc, &path).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one, resolved);
    let (status, edited) = send_json(
        svc.api(Method::PUT, &path),
        &json!({"description": "Fixed for good", "status": "MONITORING"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["description"], "Fixed for good");
    assert_eq!(edited["status"], "MONITORING");
    // publicIncidentUpdateDate defaults to now on replacement too: the edited update
    // (now the latest) sets the incident's status.
    let edited_at = time_of(&edited["publicIncidentUpdateDate"]);
    assert!(edited_at < "2099-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap());
    assert!(edited_at >= time_of(&plain["publicIncidentUpdateDate"]));
    let (_, got) = get_json(&svc, &format!("/v1/status-pages/incidents/{id}")).await;
    assert_eq!(got["lastUpdateStatus"], "MONITORING");

    let resp = svc.api(Method::DELETE, &path).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let (status, _) = get_json(&svc, &path).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, got) = get_json(&svc, &format!("/v1/status-pages/incidents/{id}")).await;
    assert_eq!(
        got["lastUpdateStatus"], "RESOLVED",
        "back to the status of the latest remaining update"
    );

    // PUT of the incident itself.
    let (status, replaced) = send_json(
        svc.api(Method::PUT, &format!("/v1/status-pages/incidents/{id}")),
        &json!({"name": "Checkout was slow", "severity": "MINOR",
                "services": [service_ref(&svc, &web)], "lastUpdateStatus": "IDENTIFIED", "duration": 42}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["name"], "Checkout was slow");
    assert_eq!(replaced["severity"], "MINOR");
    assert_eq!(replaced["duration"], 42);
    assert_eq!(replaced["lastUpdateStatus"], "IDENTIFIED");
    assert_eq!(replaced["services"].as_array().unwrap().len(), 1);
    assert_eq!(replaced["incidentUpdates"].as_array().unwrap().len(), 2);

    // The incident list, newest first, paged.
    let second = create_incident(&svc, &[&api], json!({"description": "again"})).await;
    let (_, list) = get_json(&svc, "/v1/status-pages/incidents?limit=1").await;
    assert_eq!(list["length"], 1);
    assert_eq!(list["entries"][0]["id"], second["id"]);
    let next = list["nextId"].as_str().unwrap();
    let (_, rest) = get_json(
        &svc,
        &format!("/v1/status-pages/incidents?limit=1&nextId={next}"),
    )
    .await;
    assert_eq!(rest["entries"][0]["id"], incident["id"]);
    assert_eq!(rest["nextId"], Value::Null);

    let resp = svc
        .api(Method::DELETE, &format!("/v1/status-pages/incidents/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let (status, _) = get_json(&svc, &format!("/v1/status-pages/incidents/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = get_json(
        &svc,
        &format!("/v1/status-pages/incidents/{id}/incident-updates"),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    svc.stop().await;
}

#[tokio::test]
async fn incident_limits_of_the_spec() {
    let svc = TestService::start().await;
    let api = create_service(&svc, "API").await;
    let post = || svc.api(Method::POST, "/v1/status-pages/incidents");
    let update = json!({"description": "d"});
    let mut body = incident_body(&svc, &[&api], update.clone());

    body["name"] = json!("n".repeat(256));
    expect_invalid(post(), &body, "name").await;
    body["name"] = json!("é".repeat(255));
    let (status, ok) = send_json(post(), &body).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "255 characters are allowed: {ok}"
    );
    let id = id_of(&ok);

    let good = incident_body(&svc, &[&api], update.clone());
    let with = |field: &str, value: Value| {
        let mut b = good.clone();
        b[field] = value;
        b
    };
    expect_invalid(post(), &with("services", json!([])), "services").await;
    expect_invalid(post(), &with("services", Value::Null), "services").await;
    expect_invalid(post(), &with("severity", Value::Null), "severity").await;
    expect_invalid(post(), &with("severity", json!("SEVERE")), "severity").await;
    expect_invalid(
        post(),
        &with("lastUpdateStatus", json!("DONE")),
        "lastUpdateStatus",
    )
    .await;
    expect_invalid(post(), &with("duration", json!(-1)), "duration").await;
    expect_invalid(
        post(),
        &with("incidentUpdates", json!([])),
        "incidentUpdates",
    )
    .await;
    expect_invalid(
        post(),
        &with("incidentUpdates", json!([update, update])),
        "incidentUpdates",
    )
    .await;
    expect_invalid(
        post(),
        &with("incidentUpdates", json!([{}])),
        "incidentUpdates[0].description",
    )
    .await;
    expect_invalid(
        post(),
        &with(
            "incidentUpdates",
            json!([{"description": "d", "notifySubscribers": "yes"}]),
        ),
        "incidentUpdates[0].notifySubscribers",
    )
    .await;
    expect_invalid(
        post(),
        &with("services", json!([{"id": api["id"], "name": "API"}])),
        "services[0].accountId",
    )
    .await;
    expect_invalid(
        post(),
        &with(
            "services",
            json!([{"id": Uuid::new_v4(), "name": "API", "accountId": svc.tenant.account.id}]),
        ),
        "services[0].id",
    )
    .await;

    // The same limits on PUT.
    let put = || svc.api(Method::PUT, &format!("/v1/status-pages/incidents/{id}"));
    let mut replace = json!({"name": "n", "severity": "MINOR", "services": []});
    expect_invalid(put(), &replace, "services").await;
    replace["services"] = json!([service_ref(&svc, &api)]);
    replace["name"] = json!("n".repeat(256));
    expect_invalid(put(), &replace, "name").await;

    // Incident updates.
    let updates = format!("/v1/status-pages/incidents/{id}/incident-updates");
    expect_invalid(svc.api(Method::POST, &updates), &json!({}), "description").await;
    expect_invalid(
        svc.api(Method::POST, &updates),
        &json!({"description": "d", "status": "MAINTENANCE"}),
        "status",
    )
    .await;
    expect_invalid(
        svc.api(Method::POST, &updates),
        &json!({"description": "d", "publicIncidentUpdateDate": "yesterday"}),
        "publicIncidentUpdateDate",
    )
    .await;

    // A service named by an incident is not deleted.
    let resp = svc
        .api(
            Method::DELETE,
            &format!("/v1/status-pages/services/{}", id_of(&api)),
        )
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::CONFLICT).await;
    svc.stop().await;
}

#[tokio::test]
async fn subscriptions_of_a_page() {
    let svc = TestService::start().await;
    let page = create_page(&svc, "subs", json!([])).await;
    let id = id_of(&page);
    let bulk = format!("/v1/status-pages/{id}/subscriptions/bulk");
    let (status, out) = send_json(
        svc.api(Method::POST, &bulk),
        &json!({"subscriptions": [
            {"type": "EMAIL", "config": "ops@example.com"},
            {"type": "EMAIL", "config": "dev@example.com"},
            {"type": "EMAIL", "config": "OPS@example.com"},
        ]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(
        out,
        json!({"created": 2, "skipped": 1, "status": "PENDING"})
    );
    let (status, out) = send_json(
        svc.api(Method::POST, &bulk),
        &json!({"subscriptions": [
            {"type": "EMAIL", "config": "dev@example.com"},
            {"type": "EMAIL", "config": "boss@example.com"},
        ], "autoVerify": true}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        out,
        json!({"created": 1, "skipped": 1, "status": "VERIFIED"})
    );

    let (status, list) = get_json(&svc, &format!("/v1/status-pages/{id}/subscriptions")).await;
    assert_eq!(status, StatusCode::OK);
    let list = list.as_array().unwrap().clone();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["type"], "EMAIL");
    assert_eq!(list[0]["address"], "ops@example.com");
    assert_eq!(list[0]["status"], "PENDING");
    assert_eq!(list[2]["status"], "VERIFIED");
    assert!(list[0]["updated_at"].is_string());

    let sub = id_of(&list[0]);
    let path = format!("/v1/status-pages/{id}/subscriptions/{sub}");
    let resp = svc.api(Method::DELETE, &path).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = svc.api(Method::DELETE, &path).send().await.unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;

    let post = || svc.api(Method::POST, &bulk);
    expect_invalid(post(), &json!({}), "subscriptions").await;
    expect_invalid(post(), &json!({"subscriptions": []}), "subscriptions").await;
    expect_invalid(
        post(),
        &json!({"subscriptions": [{"type": "EMAIL", "config": "not-an-address"}]}),
        "subscriptions[0].config",
    )
    .await;
    expect_invalid(
        post(),
        &json!({"subscriptions": [{"type": "SMS", "config": "+100"}]}),
        "subscriptions[0].type",
    )
    .await;
    let many: Vec<Value> = (0..101)
        .map(|i| json!({"type": "EMAIL", "config": format!("u{i}@example.com")}))
        .collect();
    expect_invalid(post(), &json!({"subscriptions": many}), "subscriptions").await;
    expect_invalid(
        post(),
        &json!({"subscriptions": [{"type": "EMAIL", "config": "a@b.example"}], "autoVerify": 1}),
        "autoVerify",
    )
    .await;
    svc.stop().await;
}

#[tokio::test]
async fn notify_subscribers_queues_one_notification_per_update() {
    let svc = TestService::start().await;
    let store = svc.handle.store().clone();
    let api = create_service(&svc, "API").await;
    let page = create_page(
        &svc,
        "notify",
        json!([{"name": "c", "services": [{"id": api["id"]}]}]),
    )
    .await;
    let (status, _) = send_json(
        svc.api(
            Method::POST,
            &format!("/v1/status-pages/{}/subscriptions/bulk", id_of(&page)),
        ),
        &json!({"subscriptions": [
            {"type": "EMAIL", "config": "verified@example.com"}], "autoVerify": true}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = send_json(
        svc.api(
            Method::POST,
            &format!("/v1/status-pages/{}/subscriptions/bulk", id_of(&page)),
        ),
        &json!({"subscriptions": [{"type": "EMAIL", "config": "pending@example.com"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);

    // Without notifySubscribers nothing is queued.
    create_incident(&svc, &[&api], json!({"description": "quiet"})).await;
    assert!(
        store
            .pending_status_notifications(10)
            .await
            .unwrap()
            .is_empty()
    );

    let incident = create_incident(
        &svc,
        &[&api],
        json!({"description": "loud", "notifySubscribers": true}),
    )
    .await;
    let id = id_of(&incident);
    let pending = store.pending_status_notifications(10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].incident_id.to_string(), id);
    assert_eq!(
        pending[0].incident_update_id.to_string(),
        id_of(&incident["incidentUpdates"][0])
    );
    assert_eq!(pending[0].account_id, svc.tenant.account.id);

    let updates = format!("/v1/status-pages/incidents/{id}/incident-updates");
    let (_, quiet) = send_json(
        svc.api(Method::POST, &updates),
        &json!({"description": "no mail"}),
    )
    .await;
    assert_eq!(quiet["notifySubscribers"], false);
    assert_eq!(
        store.pending_status_notifications(10).await.unwrap().len(),
        1
    );
    // Turning notifySubscribers on later queues it, once.
    let path = format!("{updates}/{}", id_of(&quiet));
    for _ in 0..2 {
        let (status, _) = send_json(
            svc.api(Method::PUT, &path),
            &json!({"description": "mail after all", "notifySubscribers": true}),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let pending = store.pending_status_notifications(10).await.unwrap();
    assert_eq!(pending.len(), 2);

    // Only verified subscribers of pages showing the incident's services are told.
    let subscribers = store
        .incident_subscribers(pending[0].incident_id)
        .await
        .unwrap();
    let addresses: Vec<&str> = subscribers.iter().map(|s| s.address.as_str()).collect();
    assert_eq!(addresses, ["verified@example.com"]);

    assert!(
        store
            .mark_status_notification_delivered(pending[0].id, 1)
            .await
            .unwrap()
    );
    assert!(
        !store
            .mark_status_notification_delivered(pending[0].id, 2)
            .await
            .unwrap()
    );
    assert_eq!(
        store.pending_status_notifications(10).await.unwrap().len(),
        1
    );
    // Deleting an update drops its undelivered notification.
    let resp = svc.api(Method::DELETE, &path).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert!(
        store
            .pending_status_notifications(10)
            .await
            .unwrap()
            .is_empty()
    );
    svc.stop().await;
}

#[tokio::test]
async fn accounts_are_isolated() {
    let svc = TestService::start().await;
    let other = svc.other_tenant("elsewhere").await;
    let api = create_service(&svc, "API").await;
    let page = create_page(
        &svc,
        "mine",
        json!([{"name": "c", "services": [{"id": api["id"]}]}]),
    )
    .await;
    let incident = create_incident(&svc, &[&api], json!({"description": "d"})).await;
    let update = id_of(&incident["incidentUpdates"][0]);
    let (status, _) = send_json(
        svc.api(
            Method::POST,
            &format!("/v1/status-pages/{}/subscriptions/bulk", id_of(&page)),
        ),
        &json!({"subscriptions": [{"type": "EMAIL", "config": "a@example.com"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, subs) = get_json(
        &svc,
        &format!("/v1/status-pages/{}/subscriptions", id_of(&page)),
    )
    .await;
    let sub = id_of(&subs[0]);

    let (p, s, i) = (id_of(&page), id_of(&api), id_of(&incident));
    let cases = [
        (Method::GET, format!("/v1/status-pages/{p}"), None),
        (
            Method::PUT,
            format!("/v1/status-pages/{p}"),
            Some(page_body("theirs", json!([]))),
        ),
        (Method::DELETE, format!("/v1/status-pages/{p}"), None),
        (Method::GET, format!("/v1/status-pages/services/{s}"), None),
        (
            Method::PUT,
            format!("/v1/status-pages/services/{s}"),
            Some(json!({"name": "x"})),
        ),
        (
            Method::DELETE,
            format!("/v1/status-pages/services/{s}"),
            None,
        ),
        (Method::GET, format!("/v1/status-pages/incidents/{i}"), None),
        (
            Method::PUT,
            format!("/v1/status-pages/incidents/{i}"),
            Some(json!({"name": "x", "severity": "MINOR", "services": []})),
        ),
        (
            Method::DELETE,
            format!("/v1/status-pages/incidents/{i}"),
            None,
        ),
        (
            Method::GET,
            format!("/v1/status-pages/incidents/{i}/incident-updates"),
            None,
        ),
        (
            Method::POST,
            format!("/v1/status-pages/incidents/{i}/incident-updates"),
            Some(json!({"description": "x"})),
        ),
        (
            Method::GET,
            format!("/v1/status-pages/incidents/{i}/incident-updates/{update}"),
            None,
        ),
        (
            Method::PUT,
            format!("/v1/status-pages/incidents/{i}/incident-updates/{update}"),
            Some(json!({"description": "x"})),
        ),
        (
            Method::DELETE,
            format!("/v1/status-pages/incidents/{i}/incident-updates/{update}"),
            None,
        ),
        (
            Method::GET,
            format!("/v1/status-pages/{p}/subscriptions"),
            None,
        ),
        (
            Method::POST,
            format!("/v1/status-pages/{p}/subscriptions/bulk"),
            Some(json!({"subscriptions": [{"type": "EMAIL", "config": "b@example.com"}]})),
        ),
        (
            Method::DELETE,
            format!("/v1/status-pages/{p}/subscriptions/{sub}"),
            None,
        ),
    ];
    for (method, path, body) in cases {
        let mut req = as_tenant(&svc, &other, method.clone(), &path);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let err = error_body(resp, StatusCode::NOT_FOUND).await;
        assert!(!err.to_string().contains("mine"), "{method} {path}: {err}");
    }
    // Their lists are empty.
    for path in [
        "/v1/status-pages",
        "/v1/status-pages/services",
        "/v1/status-pages/incidents",
    ] {
        let list: Value = as_tenant(&svc, &other, Method::GET, path)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(list["length"], 0, "{path}: {list}");
    }
    // Our service id in their card or incident is no link.
    let (status, err) = send_json(
        as_tenant(&svc, &other, Method::POST, "/v1/status-pages"),
        &page_body(
            "theirs",
            json!([{"name": "c", "services": [{"id": api["id"]}]}]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("cards[0].services[0].id:")
    );
    let (status, err) = send_json(
        as_tenant(&svc, &other, Method::POST, "/v1/status-pages/incidents"),
        &json!({"name": "x", "severity": "MINOR", "incidentUpdates": [{"description": "d"}],
                "services": [{"id": api["id"], "name": "API", "accountId": other.account.id}]}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("services[0].id:")
    );
    // Our nextId means nothing to them.
    let resp = as_tenant(
        &svc,
        &other,
        Method::GET,
        &format!("/v1/status-pages?nextId={p}"),
    )
    .send()
    .await
    .unwrap();
    error_body(resp, StatusCode::BAD_REQUEST).await;

    // Nothing of ours changed.
    let (status, still) = get_json(&svc, &format!("/v1/status-pages/{p}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(still["cards"], page["cards"]);
    let (_, still) = get_json(&svc, &format!("/v1/status-pages/incidents/{i}")).await;
    assert_eq!(still["incidentUpdates"].as_array().unwrap().len(), 1);
    let (_, subs) = get_json(&svc, &format!("/v1/status-pages/{p}/subscriptions")).await;
    assert_eq!(subs.as_array().unwrap().len(), 1);
    svc.stop().await;
}

#[tokio::test]
async fn unknown_ids_and_malformed_bodies() {
    let svc = TestService::start().await;
    let api = create_service(&svc, "API").await;
    let incident = create_incident(&svc, &[&api], json!({"description": "d"})).await;
    let i = id_of(&incident);
    let u = Uuid::new_v4();
    for (method, path) in [
        (Method::GET, format!("/v1/status-pages/{u}")),
        (Method::DELETE, format!("/v1/status-pages/{u}")),
        (Method::GET, format!("/v1/status-pages/services/{u}")),
        (Method::DELETE, format!("/v1/status-pages/services/{u}")),
        (Method::GET, format!("/v1/status-pages/incidents/{u}")),
        (Method::DELETE, format!("/v1/status-pages/incidents/{u}")),
        (
            Method::GET,
            format!("/v1/status-pages/incidents/{u}/incident-updates"),
        ),
        (
            Method::GET,
            format!("/v1/status-pages/incidents/{i}/incident-updates/{u}"),
        ),
        (
            Method::DELETE,
            format!("/v1/status-pages/incidents/{i}/incident-updates/{u}"),
        ),
        (Method::GET, format!("/v1/status-pages/{u}/subscriptions")),
        (
            Method::DELETE,
            format!("/v1/status-pages/{u}/subscriptions/{u}"),
        ),
    ] {
        let resp = svc.api(method.clone(), &path).send().await.unwrap();
        error_body(resp, StatusCode::NOT_FOUND).await;
    }
    for (path, field) in [
        ("/v1/status-pages/not-a-uuid", "statusPageId"),
        ("/v1/status-pages/services/42", "serviceId"),
        ("/v1/status-pages/incidents/x", "incidentId"),
    ] {
        let resp = svc.api(Method::GET, path).send().await.unwrap();
        let err = error_body(resp, StatusCode::BAD_REQUEST).await;
        assert!(err["message"].as_str().unwrap().starts_with(field), "{err}");
    }
    let (status, _) = send_json(
        svc.api(Method::PUT, &format!("/v1/status-pages/{u}")),
        &page_body("nowhere", json!([])),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send_json(
        svc.api(
            Method::POST,
            &format!("/v1/status-pages/incidents/{u}/incident-updates"),
        ),
        &json!({"description": "d"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    for (method, path) in [
        (Method::POST, "/v1/status-pages".to_owned()),
        (Method::POST, "/v1/status-pages/services".to_owned()),
        (
            Method::PUT,
            format!("/v1/status-pages/services/{}", id_of(&api)),
        ),
        (Method::POST, "/v1/status-pages/incidents".to_owned()),
        (Method::PUT, format!("/v1/status-pages/incidents/{i}")),
        (
            Method::POST,
            format!("/v1/status-pages/incidents/{i}/incident-updates"),
        ),
    ] {
        for body in ["{\"name\": ", "[1, 2]", ""] {
            let resp = svc
                .api(method.clone(), &path)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            error_body(resp, StatusCode::BAD_REQUEST).await;
        }
    }
    svc.stop().await;
}

#[tokio::test]
async fn services_link_to_checks_through_trigger_incident() {
    let svc = TestService::start().await;
    let store = svc.handle.store().clone();
    let api = create_service(&svc, "API").await;
    let web = create_service(&svc, "Website").await;
    let linked = svc
        .create_check(json!({"name": "api health", "triggerIncident": {
            "serviceId": api["id"], "severity": "MAJOR", "name": "API down",
            "description": "d", "notifySubscribers": false}}))
        .await;
    svc.create_check(json!({"name": "unlinked"})).await;

    // Another account naming our service id links nothing of ours.
    let other = svc.other_tenant("elsewhere").await;
    let resp = as_tenant(&svc, &other, Method::POST, "/v1/checks/url")
        .json(
            &json!({"name": "theirs", "request": {"url": "http://127.0.0.1:9/"},
                      "privateLocations": ["elsewhere"],
                      "triggerIncident": {"serviceId": api["id"], "severity": "MINOR",
                          "name": "x", "description": "d", "notifySubscribers": false}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);

    let ids = [
        Uuid::parse_str(&id_of(&api)).unwrap(),
        Uuid::parse_str(&id_of(&web)).unwrap(),
    ];
    let links = store
        .service_checks(svc.tenant.account.id, &ids)
        .await
        .unwrap();
    assert_eq!(links.len(), 1, "{links:?}");
    assert_eq!(links[0].service_id, ids[0]);
    assert_eq!(links[0].check_id.to_string(), id_of(&linked));
    assert_eq!(links[0].check_name, "api health");
    assert_eq!(links[0].last_status, None, "never ran");
    let theirs = store.service_checks(other.account.id, &ids).await.unwrap();
    assert!(theirs.is_empty(), "{theirs:?}");
    svc.stop().await;
}

fn credentials(dir: &std::path::Path) -> (String, String) {
    let text = std::fs::read_to_string(dir.join("credentials.json")).unwrap();
    let c: Value = serde_json::from_str(&text).unwrap();
    (
        c["apiKey"].as_str().unwrap().to_owned(),
        c["accountId"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_real_serve_process_keeps_status_pages_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let serve = serve_support::Serve::start(dir.path());
    let (key, account) = credentials(dir.path());
    let call = |method: Method, base: &str, path: &str| {
        http.request(method, format!("{base}{path}"))
            .bearer_auth(&key)
            .header("x-service-account", &account)
    };
    let (status, service) = send_json(
        call(Method::POST, &serve.base, "/v1/status-pages/services"),
        &json!({"name": "API"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{service}");
    let (status, page) = send_json(
        call(Method::POST, &serve.base, "/v1/status-pages"),
        &page_body(
            "durable",
            json!([{"name": "c", "services": [{"id": service["id"]}]}]),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{page}");
    let (status, incident) = send_json(
        call(Method::POST, &serve.base, "/v1/status-pages/incidents"),
        &json!({"name": "down", "severity": "CRITICAL", "incidentUpdates": [{"description": "d"}],
                "services": [{"id": service["id"], "name": "API", "accountId": account}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{incident}");
    drop(serve);

    let serve = serve_support::Serve::start(dir.path());
    let list: Value = call(Method::GET, &serve.base, "/v1/status-pages")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["length"], 1);
    let entry = &list["entries"][0];
    assert_eq!(entry["id"], page["id"]);
    assert_eq!(entry["cards"], page["cards"]);
    assert_eq!(entry["incidents"][0]["id"], incident["id"]);
    let ids: HashSet<&str> = entry["cards"][0]["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(service["id"].as_str().unwrap()));
}
