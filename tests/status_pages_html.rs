//! Status pages served as HTML by a real service over HTTP: cards with each service's
//! state from its linked checks' latest results, incidents with their timeline, theme
//! colors, escaping of every user string, custom domains by `Host`, `redirectTo`,
//! private pages opened with a key (cookie flow, key deletion, account isolation),
//! unknown pages, and a page of 20 cards x 10 services.

mod service_support;
mod status_html_support;

use reqwest::header::{CONTENT_TYPE, COOKIE, HOST, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use outpost::model::RunStatus;
use service_support::{TestService, error_body};
use status_html_support::{
    card, colors, incident, incident_update, linked_check_with_result, page, page_key, send,
    service, theme,
};

/// A client that never follows redirects.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// GET `path` (with optional extra headers); returns status, headers and body.
async fn get(
    svc: &TestService,
    path: &str,
    headers: &[(reqwest::header::HeaderName, &str)],
) -> (StatusCode, reqwest::header::HeaderMap, String) {
    let mut req = client().get(format!("{}{path}", svc.base));
    for (name, value) in headers {
        req = req.header(name.clone(), *value);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    (status, headers, resp.text().await.unwrap())
}

fn is_html(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"))
}

/// The `<li>` of service `service` in `body`.
fn service_row<'a>(body: &'a str, service: &Value) -> &'a str {
    let marker = format!("data-service=\"{}\"", service["id"].as_str().unwrap());
    let start = body
        .find(&marker)
        .unwrap_or_else(|| panic!("no row {marker} in {body}"));
    let end = body[start..].find("</li>").unwrap() + start;
    &body[start..end]
}

/// The section with id `id` in `body`.
fn section<'a>(body: &'a str, id: &str) -> &'a str {
    let marker = format!("<section id=\"{id}\">");
    let start = body
        .find(&marker)
        .unwrap_or_else(|| panic!("no section {id} in {body}"));
    let end = body[start..].find("</section>").unwrap() + start;
    &body[start..end]
}

#[tokio::test]
async fn public_page_shows_service_states_incidents_and_theme() {
    let svc = TestService::start().await;
    let api = service(&svc, "Public API").await;
    let web = service(&svc, "Website").await;
    let mail = service(&svc, "Mail relay").await;
    let db = service(&svc, "Database").await;
    linked_check_with_result(&svc, &api, RunStatus::Passed).await;
    linked_check_with_result(&svc, &web, RunStatus::Failed).await;
    linked_check_with_result(&svc, &db, RunStatus::Passed).await;
    linked_check_with_result(&svc, &db, RunStatus::Failed).await;
    page(
        &svc,
        json!({"name": "Acme status", "url": "acme", "description": "How Acme is doing",
               "themeColors": theme("#F0F4F8", "#101820"),
               "logo": "https://cdn.example.com/logo.png",
               "logoDark": "https://cdn.example.com/logo-dark.png",
               "favicon": "https://cdn.example.com/favicon.ico",
               "cards": [card("Core", &[&api, &web]), card("Other", &[&mail, &db])]}),
    )
    .await;
    let outage = incident(
        &svc,
        "Website unreachable",
        &[&web],
        "CRITICAL",
        json!({"description": "We are looking into it", "status": "INVESTIGATING"}),
    )
    .await;
    incident_update(
        &svc,
        &outage,
        json!({"description": "A bad deploy, rolling back", "status": "IDENTIFIED"}),
    )
    .await;
    let old = incident(
        &svc,
        "Slow API responses",
        &[&api],
        "MINOR",
        json!({"description": "Fixed by a cache flush", "status": "RESOLVED"}),
    )
    .await;
    assert_eq!(old["lastUpdateStatus"], "RESOLVED");

    let (status, headers, body) = get(&svc, "/status/acme", &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(is_html(&headers), "{headers:?}");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(!body.contains("<script"), "no script on the page");
    assert!(body.contains("<title>Acme status</title>"));
    assert!(body.contains("How Acme is doing"));
    assert!(body.contains("<h3>Core</h3>") && body.contains("<h3>Other</h3>"));

    let row = service_row(&body, &api);
    assert!(
        row.contains("Public API") && row.contains(">Operational<"),
        "{row}"
    );
    let row = service_row(&body, &web);
    assert!(row.contains("Website") && row.contains(">Down<"), "{row}");
    let row = service_row(&body, &mail);
    assert!(row.contains(">Unknown<"), "no check linked: {row}");
    let row = service_row(&body, &db);
    assert!(row.contains(">Degraded<"), "one of two checks fails: {row}");
    assert!(body.contains("Some services are down"), "banner");
    let legend = section(&body, "legend");
    for word in ["Operational", "Degraded", "Down", "Unknown"] {
        assert!(legend.contains(word), "{legend}");
    }

    let active = section(&body, "active-incidents");
    assert!(active.contains("Website unreachable"), "{active}");
    assert!(
        active.contains("CRITICAL") && active.contains("Identified"),
        "{active}"
    );
    let newest = active
        .find("A bad deploy, rolling back")
        .expect("newest update");
    let first = active.find("We are looking into it").expect("first update");
    assert!(newest < first, "timeline newest first: {active}");
    assert!(!active.contains("Slow API responses"), "{active}");
    let recent = section(&body, "recent-incidents");
    assert!(recent.contains("Slow API responses") && recent.contains("Fixed by a cache flush"));
    assert!(!recent.contains("Website unreachable"));

    // AUTO: light colors by default, dark ones under prefers-color-scheme: dark.
    assert!(body.contains("--body-bg:#F0F4F8;"), "light theme");
    let media = body
        .find("@media (prefers-color-scheme: dark)")
        .expect("dark media query");
    let dark_bg = body.find("--body-bg:#101820;").expect("dark theme");
    assert!(dark_bg > media, "dark colors inside the media query");
    assert!(body.contains("<link rel=\"icon\" href=\"https://cdn.example.com/favicon.ico\">"));
    assert!(body.contains(
        "<source media=\"(prefers-color-scheme: dark)\" srcset=\"https://cdn.example.com/logo-dark.png\">"
    ));
    assert!(body.contains("src=\"https://cdn.example.com/logo.png\""));

    // The JSON API is untouched by the HTML pages.
    let resp = svc
        .api(Method::GET, "/v1/no-such-route")
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

#[tokio::test]
async fn fixed_themes_ignore_the_browser_preference() {
    let svc = TestService::start().await;
    let s = service(&svc, "API").await;
    for (url, fixed, shown, hidden) in [
        ("light-page", "LIGHT", "#F0F4F8", "#101820"),
        ("dark-page", "DARK", "#101820", "#F0F4F8"),
    ] {
        page(
            &svc,
            json!({"name": url, "url": url, "defaultTheme": fixed,
                   "themeColors": theme("#F0F4F8", "#101820"), "cards": [card("C", &[&s])]}),
        )
        .await;
        let (status, _, body) = get(&svc, &format!("/status/{url}"), &[]).await;
        assert_eq!(status, StatusCode::OK);
        assert!(!body.contains("prefers-color-scheme"), "{url}: {body}");
        assert!(body.contains(&format!("--body-bg:{shown};")), "{url}");
        assert!(!body.contains(&format!("--body-bg:{hidden};")), "{url}");
    }
    svc.stop().await;
}

#[tokio::test]
async fn every_user_string_is_escaped() {
    let svc = TestService::start().await;
    let evil = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>";
    let s = service(&svc, &format!("svc {evil}")).await;
    page(
        &svc,
        json!({"name": format!("page {evil}"), "url": "evil", "description": format!("desc {evil}"),
               "cards": [card(&format!("card {evil}"), &[&s])]}),
    )
    .await;
    let i = incident(
        &svc,
        &format!("incident {evil}"),
        &[&s],
        "MAJOR",
        json!({"description": format!("update {evil}")}),
    )
    .await;
    assert_eq!(i["lastUpdateStatus"], "INVESTIGATING");
    let (status, _, body) = get(&svc, "/status/evil", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body.contains("<script"), "{body}");
    assert!(!body.contains("<img src=x"), "{body}");
    assert!(!body.contains("'><"), "{body}");
    let escaped =
        "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&gt;&lt;img src=x onerror=alert(2)&gt;";
    for prefix in ["page", "desc", "card", "svc", "incident", "update"] {
        assert!(
            body.contains(&format!("{prefix} {escaped}")),
            "{prefix} not escaped as expected: {body}"
        );
    }
    // The API refuses script links and non-hex colors, so none can reach a page.
    let (status, _) = send(
        &svc,
        Method::POST,
        "/v1/status-pages",
        &json!({"name": "x", "url": "x", "cards": [], "logo": "javascript:alert(1)"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let mut bad = colors("#FFFFFF");
    bad["bodyBackgroundColor"] = json!("red;}body{display:none");
    let (status, _) = send(
        &svc,
        Method::POST,
        "/v1/status-pages",
        &json!({"name": "x", "url": "x", "cards": [], "themeColors": {"light": bad.clone(), "dark": bad}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    svc.stop().await;
}

#[tokio::test]
async fn custom_domain_is_served_by_host_header() {
    let svc = TestService::start().await;
    let s = service(&svc, "Checkout").await;
    page(
        &svc,
        json!({"name": "Shop status", "url": "shop", "customDomain": "status.shop.example",
               "cards": [card("C", &[&s])]}),
    )
    .await;
    for host in [
        "status.shop.example",
        "STATUS.Shop.Example:8080",
        "status.shop.example.",
    ] {
        let (status, headers, body) = get(&svc, "/", &[(HOST, host)]).await;
        assert_eq!(status, StatusCode::OK, "{host}: {body}");
        assert!(is_html(&headers));
        assert!(
            body.contains("Shop status") && body.contains("Checkout"),
            "{host}"
        );
    }
    // Any other host: `/` is the API's unknown route (JSON error body).
    let resp = client()
        .get(format!("{}/", svc.base))
        .header(HOST, "other.example")
        .send()
        .await
        .unwrap();
    let err = error_body(resp, StatusCode::NOT_FOUND).await;
    assert!(!err.to_string().contains("Shop status"));
    // The same page keeps its address under /status too.
    let (status, _, body) = get(&svc, "/status/shop", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Shop status"));
    svc.stop().await;
}

#[tokio::test]
async fn redirect_to_answers_302() {
    let svc = TestService::start().await;
    page(
        &svc,
        json!({"name": "Moved", "url": "moved", "redirectTo": "https://status.example.org/new",
               "cards": []}),
    )
    .await;
    let (status, headers, _) = get(&svc, "/status/moved", &[]).await;
    assert_eq!(status, StatusCode::FOUND);
    assert_eq!(headers[LOCATION], "https://status.example.org/new");
    svc.stop().await;
}

#[tokio::test]
async fn unknown_page_is_an_html_404() {
    let svc = TestService::start().await;
    for path in ["/status/nope", "/status/%3Cscript%3E"] {
        let (status, headers, body) = get(&svc, path, &[]).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert!(is_html(&headers), "{path}: {headers:?}");
        assert!(body.contains("Status page not found"), "{body}");
        assert!(!body.contains("<script>"), "{body}");
        assert!(
            !body.contains("statusCode"),
            "not the JSON error body: {body}"
        );
    }
    svc.stop().await;
}

fn cookie_of(headers: &reqwest::header::HeaderMap) -> String {
    let set = headers[SET_COOKIE].to_str().unwrap();
    set.split(';').next().unwrap().to_owned()
}

#[tokio::test]
async fn private_pages_open_with_a_key_and_lock_when_it_is_deleted() {
    let svc = TestService::start().await;
    let secret_service = service(&svc, "Internal billing").await;
    let private = page(
        &svc,
        json!({"name": "Team status", "url": "team", "isPrivate": true,
               "description": "internal only", "cards": [card("Backoffice", &[&secret_service])]}),
    )
    .await;
    incident(
        &svc,
        "Billing stuck",
        &[&secret_service],
        "MAJOR",
        json!({"description": "queue is full"}),
    )
    .await;
    let page_id = private["id"].as_str().unwrap().to_owned();

    // No key yet: the key form, and nothing of the page (not even its name).
    let (status, headers, body) = get(&svc, "/status/team", &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(is_html(&headers));
    assert!(body.contains("name=\"key\""), "{body}");
    for secret in [
        "Team status",
        "Internal billing",
        "Backoffice",
        "Billing stuck",
        "queue is full",
        "internal only",
    ] {
        assert!(!body.contains(secret), "{secret} leaked: {body}");
    }
    assert!(
        headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("no-store")
    );

    // Keys: raw once, masked after; listed masked on the page entry.
    let (key_id, raw) = page_key(&svc, &private).await;
    assert!(raw.starts_with("ops_") && raw.len() > 40, "{raw}");
    let (status, listed) = send(
        &svc,
        Method::GET,
        &format!("/v1/status-pages/{page_id}/keys"),
        &Value::Null,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], key_id.as_str());
    let masked = listed[0]["maskedKey"].as_str().unwrap();
    assert!(
        masked.contains("...") && !listed.to_string().contains(&raw),
        "{listed}"
    );
    assert!(raw.ends_with(&masked[masked.len() - 4..]));
    let (_, pages) = send(&svc, Method::GET, "/v1/status-pages", &Value::Null).await;
    assert_eq!(pages["entries"][0]["keys"], listed, "{pages}");

    // A wrong key: 401 with the form again; no cookie.
    let (status, headers, body) = get(&svc, "/status/team?key=ops_wrong", &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.get(SET_COOKIE).is_none());
    assert!(body.contains("not valid") && !body.contains("Internal billing"));

    // The right key: 303 to the clean address with a scoped HttpOnly cookie.
    let (status, headers, _) = get(&svc, &format!("/status/team?key={raw}"), &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[LOCATION], "/status/team");
    let set = headers[SET_COOKIE].to_str().unwrap();
    for part in ["HttpOnly", "SameSite=Lax", "Path=/status/team"] {
        assert!(set.contains(part), "{part} missing: {set}");
    }
    let cookie = cookie_of(&headers);
    let (status, _, body) = get(&svc, "/status/team", &[(COOKIE, &cookie)]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("Internal billing") && body.contains("Billing stuck"),
        "{body}"
    );

    // Another page's key opens nothing here.
    let other_page = page(
        &svc,
        json!({"name": "Other", "url": "other-private", "isPrivate": true, "cards": []}),
    )
    .await;
    let (_, other_raw) = page_key(&svc, &other_page).await;
    let (status, _, _) = get(&svc, &format!("/status/team?key={other_raw}"), &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let foreign_cookie = format!("outpost_status_key={other_raw}");
    let (status, _, _) = get(&svc, "/status/team", &[(COOKIE, &foreign_cookie)]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Another account never reaches the keys.
    let stranger = svc.other_tenant("stranger").await;
    for (method, path) in [
        (Method::GET, format!("/v1/status-pages/{page_id}/keys")),
        (Method::POST, format!("/v1/status-pages/{page_id}/keys")),
        (
            Method::DELETE,
            format!("/v1/status-pages/{page_id}/keys/{key_id}"),
        ),
    ] {
        let resp = svc
            .http
            .request(method.clone(), format!("{}{path}", svc.base))
            .bearer_auth(&stranger.api_key)
            .header("x-service-account", stranger.account.id.to_string())
            .send()
            .await
            .unwrap();
        error_body(resp, StatusCode::NOT_FOUND).await;
    }
    let (status, _, _) = get(&svc, "/status/team", &[(COOKIE, &cookie)]).await;
    assert_eq!(status, StatusCode::OK, "the stranger deleted nothing");

    // Deleting the key locks its holders out.
    let resp = svc
        .api(
            Method::DELETE,
            &format!("/v1/status-pages/{page_id}/keys/{key_id}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let (status, _, body) = get(&svc, "/status/team", &[(COOKIE, &cookie)]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!body.contains("Internal billing"));
    let resp = svc
        .api(
            Method::DELETE,
            &format!("/v1/status-pages/{page_id}/keys/{key_id}"),
        )
        .send()
        .await
        .unwrap();
    error_body(resp, StatusCode::NOT_FOUND).await;
    svc.stop().await;
}

#[tokio::test]
async fn private_page_on_a_custom_domain_scopes_the_cookie_to_the_root() {
    let svc = TestService::start().await;
    let p = page(
        &svc,
        json!({"name": "Ops", "url": "ops", "isPrivate": true,
               "customDomain": "ops.example.net", "cards": []}),
    )
    .await;
    let (_, raw) = page_key(&svc, &p).await;
    let (status, headers, _) =
        get(&svc, &format!("/?key={raw}"), &[(HOST, "ops.example.net")]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[LOCATION], "/");
    assert!(headers[SET_COOKIE].to_str().unwrap().contains("Path=/;"));
    let cookie = cookie_of(&headers);
    let (status, _, body) = get(&svc, "/", &[(HOST, "ops.example.net"), (COOKIE, &cookie)]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("<h1>Ops</h1>"));
    svc.stop().await;
}

#[tokio::test]
async fn a_page_of_200_services_renders_every_one() {
    let svc = TestService::start().await;
    let mut cards = Vec::new();
    let mut all = Vec::new();
    for c in 0..20 {
        let mut services = Vec::new();
        for s in 0..10 {
            services.push(service(&svc, &format!("svc-{c}-{s}")).await);
        }
        let refs: Vec<&Value> = services.iter().collect();
        cards.push(card(&format!("card-{c}"), &refs));
        all.extend(services);
    }
    linked_check_with_result(&svc, &all[0], RunStatus::Passed).await;
    page(&svc, json!({"name": "Big", "url": "big", "cards": cards})).await;
    let (status, _, body) = get(&svc, "/status/big", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.matches("<li data-service=").count(), 200);
    assert!(service_row(&body, &all[0]).contains(">Operational<"));
    assert!(service_row(&body, &all[199]).contains(">Unknown<"));
    svc.stop().await;
}

#[tokio::test]
async fn a_visitor_gets_the_previous_render_only_while_another_render_runs() {
    let svc = TestService::start().await;
    let s = service(&svc, "Alpha relay").await;
    page(
        &svc,
        json!({"name": "Stale", "url": "stale", "cards": [card("Core", &[&s])]}),
    )
    .await;
    let (status, _, body) = get(&svc, "/status/stale", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Alpha relay"), "{body}");

    // A render of the page is in progress (held here) when the service is renamed: a
    // visitor gets the previous render at once instead of waiting for that render.
    let rendering = svc.handle.hold_status_page_render("stale").await;
    let id = s["id"].as_str().unwrap();
    let (status, body) = send(
        &svc,
        Method::PUT,
        &format!("/v1/status-pages/services/{id}"),
        &json!({"name": "Beta relay"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let waited = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        get(&svc, "/status/stale", &[]),
    )
    .await;
    let (status, headers, body) = waited.expect("the visitor waited for the render in progress");
    assert_eq!(status, StatusCode::OK);
    assert!(is_html(&headers));
    assert!(body.contains("Alpha relay"), "the previous render: {body}");

    // No render in progress: the next visitor renders, and sees the rename.
    drop(rendering);
    let (status, _, body) = get(&svc, "/status/stale", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("Beta relay"), "{body}");
    assert!(!body.contains("Alpha relay"), "{body}");
    // Sequential visitors after a write see it at once.
    let (status, body) = send(
        &svc,
        Method::PUT,
        &format!("/v1/status-pages/services/{id}"),
        &json!({"name": "Gamma relay"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, _, body) = get(&svc, "/status/stale", &[]).await;
    assert!(body.contains("Gamma relay"), "{body}");
    svc.stop().await;
}

/// Plain heartbeat pings write only rows no page reads: they leave the store's write
/// generation (which rendered pages are kept under) as it is; other writes move it.
#[tokio::test]
async fn heartbeat_pings_leave_rendered_pages_current() {
    use outpost::model::HeartbeatState;
    use outpost::service::store::NewEvent;

    let dir = tempfile::tempdir().unwrap();
    let store = outpost::service::admin::open_store(dir.path())
        .await
        .unwrap();
    let ping = || NewEvent {
        id: uuid::Uuid::new_v4(),
        check_id: uuid::Uuid::new_v4(),
        state: HeartbeatState::Received,
        ts: 1,
        method: Some("GET".into()),
        source: None,
        user_agent: None,
        body: None,
    };
    store.create_account("a").await.unwrap();
    // A ping takes the write connection only once the account's write gave it back,
    // so the generation is settled after it.
    store.insert_heartbeat_events(&[ping()]).await.unwrap();
    let settled = store.write_generation();
    assert!(settled.is_some());
    store.insert_heartbeat_events(&[ping()]).await.unwrap();
    assert_eq!(
        store.write_generation(),
        settled,
        "a ping invalidated pages"
    );
    store.create_account("b").await.unwrap();
    store.insert_heartbeat_events(&[ping()]).await.unwrap();
    assert!(store.write_generation().is_some());
    assert_ne!(store.write_generation(), settled, "a write went unnoticed");
    store.close().await;
}
