//! Fuzzing the public API of one real `outpost serve` with proptest: arbitrary JSON
//! bodies (random shapes, and valid bodies of every POST/PUT route mutated: wrong
//! types, huge numbers and number literals serde cannot hold, long strings, unicode,
//! nulls, missing and extra fields, raw non-JSON text) and arbitrary path ids (garbage,
//! huge numbers, unicode, ids of other resources) on the GET/PUT/DELETE routes. Every
//! answer must come (no dropped connection), be below 500, and every error body must
//! be `{statusCode, error, message}`.
//!
//! `FUZZ_CASES` sets the cases per route (default 40); failures of all routes are
//! collected and reported together, shrunk.

mod serve_support;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use reqwest::Method;
use serde_json::{Map, Value, json};
use serve_support::Serve;

/// The kinds of object a path id can name; a DELETE never gets a real id of its own
/// kind, so the fixtures survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Check,
    Heartbeat,
    Browser,
    /// A check of the type of this route segment (`api`, `tcp`, ...).
    Typed(&'static str),
    Channel,
    Location,
    Session,
    StatusPage,
    StatusService,
    Incident,
    IncidentUpdate,
    None,
}

impl Kind {
    /// Whether a route that must not get real ids of `self` must not get `other`'s:
    /// browser and heartbeat checks are checks too.
    fn covers(self, other: Kind) -> bool {
        match self {
            Kind::None => false,
            Kind::Check => matches!(
                other,
                Kind::Check | Kind::Browser | Kind::Heartbeat | Kind::Typed(_)
            ),
            k => k == other,
        }
    }
}

/// Real ids made before fuzzing.
struct Fixtures {
    ids: Vec<(Kind, String)>,
    slug: String,
    account: String,
}

impl Fixtures {
    fn of(&self, kind: Kind) -> String {
        self.ids
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, id)| id.clone())
            .unwrap_or_default()
    }
}

struct Env {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    base: String,
    key: String,
    account: String,
    fixtures: Fixtures,
    /// How many answers of each status, per route (printed with `--nocapture`).
    seen: std::cell::RefCell<
        std::collections::BTreeMap<String, std::collections::BTreeMap<u16, u32>>,
    >,
}

/// What one request got back.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Env {
    fn send(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<Answer, String> {
        self.send_with(method, path, body, &[("content-type", "application/json")])
    }

    fn send_with(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> Result<Answer, String> {
        self.rt.block_on(async {
            let mut req = self
                .http
                .request(method.clone(), format!("{}{path}", self.base))
                .bearer_auth(&self.key)
                .header("x-service-account", &self.account);
            if let Some(b) = body {
                for (name, value) in headers {
                    req = req.header(*name, *value);
                }
                req = req.body(b);
            }
            let resp = req
                .send()
                .await
                .map_err(|e| format!("{method} {path}: no answer: {e:?}"))?;
            let status = resp.status().as_u16();
            let body = resp
                .bytes()
                .await
                .map_err(|e| format!("{method} {path}: answer cut short: {e:?}"))?;
            Ok(Answer {
                status,
                body: body.to_vec(),
            })
        })
    }

    fn json(&self, method: Method, path: &str, body: &Value) -> Value {
        let a = self
            .send(method, path, Some(body.to_string().into_bytes()))
            .unwrap();
        assert!(
            a.status < 300,
            "{path}: {}",
            String::from_utf8_lossy(&a.body)
        );
        serde_json::from_slice(&a.body).unwrap()
    }
}

impl Env {
    /// Counts an answer of the route `what`.
    fn count(&self, what: &str, status: u16) {
        *self
            .seen
            .borrow_mut()
            .entry(what.to_owned())
            .or_default()
            .entry(status)
            .or_default() += 1;
    }
}

/// The checks every answer must pass.
fn judge(what: &str, a: &Answer) -> Result<(), TestCaseError> {
    let text = || {
        String::from_utf8_lossy(&a.body)
            .chars()
            .take(300)
            .collect::<String>()
    };
    if a.status >= 500 {
        return Err(TestCaseError::fail(format!(
            "{what}: {} {}",
            a.status,
            text()
        )));
    }
    if a.status >= 400 {
        let body: Value = serde_json::from_slice(&a.body).map_err(|_| {
            TestCaseError::fail(format!(
                "{what}: {} with a non-JSON body {}",
                a.status,
                text()
            ))
        })?;
        let ok = body["statusCode"].as_u64() == Some(u64::from(a.status))
            && body["error"].is_string()
            && body["message"].is_string();
        if !ok {
            return Err(TestCaseError::fail(format!(
                "{what}: {} with error body {body}",
                a.status
            )));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- strategies

/// Strings that tend to break things: empty, long, unicode, control characters,
/// path-like, numeric, ids.
fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "\\PC{0,40}",
        "[a-z0-9._-]{1,20}",
        any::<String>(),
        (1usize..70_000).prop_map(|n| "x".repeat(n)),
        Just("../../../etc/passwd".to_owned()),
        Just("\u{0}\u{202e}\u{1F600}é\u{FFFF}".to_owned()),
        Just("00000000-0000-0000-0000-000000000000".to_owned()),
        Just("99999999999999999999999999".to_owned()),
        Just("http://127.0.0.1:9/".to_owned()),
        Just("{{SECRET}}".to_owned()),
    ]
}

fn nasty_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        Just(json!(i64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(u64::MAX)),
        Just(json!(1e308)),
        Just(json!(-1e308)),
        Just(json!(0.5)),
        Just(json!(-1)),
        Just(json!(0)),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        nasty_number(),
        nasty_string().prop_map(Value::String),
    ]
}

/// Any JSON value of modest size.
fn arb_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,12}|\\PC{0,8}", inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One change to a valid body, at the place `path` picks (each step indexes the
/// children of the current value, modulo their count).
#[derive(Debug, Clone)]
enum Mutation {
    Replace(Value),
    Remove,
    AddField(String, Value),
    /// The value becomes a number literal no f64/i64 holds, written into the text.
    HugeLiteral(&'static str),
}

fn mutation() -> impl Strategy<Value = (Vec<usize>, Mutation)> {
    let m = prop_oneof![
        3 => arb_json().prop_map(Mutation::Replace),
        2 => leaf().prop_map(Mutation::Replace),
        2 => Just(Mutation::Remove),
        1 => ("[a-zA-Z]{1,12}", arb_json()).prop_map(|(k, v)| Mutation::AddField(k, v)),
        1 => prop::sample::select(vec![
            "1e999",
            "-1e999",
            "123456789012345678901234567890",
            "-99999999999999999999999",
            "1E400",
            "0.000000000000000000000000000000001e-400",
        ])
        .prop_map(Mutation::HugeLiteral),
    ];
    (prop::collection::vec(any::<usize>(), 0..4), m)
}

/// Marker that `HugeLiteral` leaves in the value, replaced in the serialized text.
const LITERAL_MARK: &str = "__fuzz_literal__";

fn apply(body: &mut Value, path: &[usize], m: &Mutation) {
    // Walk down to the parent of the target, then act on one child.
    let mut cur = body;
    for (depth, step) in path.iter().enumerate() {
        let last = depth + 1 == path.len();
        let children = match cur {
            Value::Object(o) => o.len(),
            Value::Array(a) => a.len(),
            _ => 0,
        };
        if children == 0 {
            break;
        }
        let i = step % children;
        if last {
            match cur {
                Value::Object(o) => {
                    let Some(key) = o.keys().nth(i).cloned() else {
                        return;
                    };
                    match m {
                        Mutation::Remove => {
                            o.remove(&key);
                        }
                        Mutation::Replace(v) => {
                            o.insert(key, v.clone());
                        }
                        Mutation::AddField(k, v) => {
                            o.insert(k.clone(), v.clone());
                        }
                        Mutation::HugeLiteral(_) => {
                            o.insert(key, json!(LITERAL_MARK));
                        }
                    }
                }
                Value::Array(a) => match m {
                    Mutation::Remove => {
                        a.remove(i);
                    }
                    Mutation::Replace(v) | Mutation::AddField(_, v) => a[i] = v.clone(),
                    Mutation::HugeLiteral(_) => a[i] = json!(LITERAL_MARK),
                },
                _ => {}
            }
            return;
        }
        cur = match cur {
            Value::Object(o) => match o.values_mut().nth(i) {
                Some(v) => v,
                None => return,
            },
            Value::Array(a) => &mut a[i],
            _ => return,
        };
    }
    // An empty path (or a leaf reached early): change the value itself.
    match m {
        Mutation::Replace(v) => *cur = v.clone(),
        Mutation::Remove => *cur = Value::Null,
        Mutation::AddField(k, v) => {
            if let Value::Object(o) = cur {
                o.insert(k.clone(), v.clone());
            } else {
                *cur = v.clone();
            }
        }
        Mutation::HugeLiteral(_) => *cur = json!(LITERAL_MARK),
    }
}

/// Headers a body goes with: mostly JSON, sometimes another or no media type, or a
/// content encoding the bytes do not have.
fn body_headers() -> impl Strategy<Value = Vec<(&'static str, &'static str)>> {
    prop_oneof![
        8 => Just(vec![("content-type", "application/json")]),
        1 => prop::sample::select(vec![
            vec![],
            vec![("content-type", "text/plain")],
            vec![("content-type", "application/json; charset=utf-16")],
            vec![("content-type", "application/merge-patch+json")],
            vec![("content-type", "application/json"), ("content-encoding", "gzip")],
            vec![("content-type", "application/json"), ("content-encoding", "br")],
        ]),
    ]
}

/// A body to send: a mutated valid body, a random value, or raw text.
#[derive(Debug, Clone)]
enum BodyCase {
    Mutated(Vec<(Vec<usize>, Mutation)>),
    Random(Value),
    Raw(String),
}

fn body_case() -> impl Strategy<Value = BodyCase> {
    prop_oneof![
        6 => prop::collection::vec(mutation(), 1..4).prop_map(BodyCase::Mutated),
        2 => arb_json().prop_map(BodyCase::Random),
        1 => prop_oneof![
            "\\PC{0,200}",
            Just("{".to_owned()),
            Just("{\"name\": \"x\",}".to_owned()),
            Just("[".repeat(10_000)),
            Just("\u{FEFF}{}".to_owned()),
            // Beyond the 1 MiB limit of API bodies.
            Just(format!("{{\"name\": \"{}\"}}", "x".repeat(1_100_000))),
        ]
        .prop_map(BodyCase::Raw),
    ]
}

fn render(valid: &Value, case: &BodyCase) -> Vec<u8> {
    match case {
        BodyCase::Random(v) => v.to_string().into_bytes(),
        BodyCase::Raw(s) => s.clone().into_bytes(),
        BodyCase::Mutated(ms) => {
            let mut body = valid.clone();
            let mut literal = None;
            for (path, m) in ms {
                apply(&mut body, path, m);
                if let Mutation::HugeLiteral(l) = m {
                    literal = Some(*l);
                }
            }
            let text = body.to_string();
            match literal {
                Some(l) => text.replace(&format!("\"{LITERAL_MARK}\""), l),
                None => text,
            }
            .into_bytes()
        }
    }
}

/// Path ids: garbage, huge numbers, unicode, and the ids of real objects.
fn path_id(real: Vec<String>) -> impl Strategy<Value = String> {
    let garbage = prop_oneof![
        Just(String::new()),
        "\\PC{1,40}",
        "[0-9]{1,40}",
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        Just("-1".to_owned()),
        Just("0".to_owned()),
        Just("1e999".to_owned()),
        Just("%00".to_owned()),
        Just("%2e%2e%2f%2e%2e".to_owned()),
        Just("00000000-0000-0000-0000-000000000000".to_owned()),
        Just("ffffffff-ffff-ffff-ffff-ffffffffffffx".to_owned()),
        any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).to_string()),
        (1usize..5000).prop_map(|n| "9".repeat(n)),
    ];
    if real.is_empty() {
        garbage.boxed()
    } else {
        prop_oneof![3 => garbage, 1 => prop::sample::select(real)].boxed()
    }
}

/// Percent-encodes a path segment the way a client would (so unicode reaches the
/// server), keeping already-escaped input as it is.
fn segment(raw: &str) -> String {
    if raw.starts_with('%') {
        return raw.to_owned();
    }
    url::form_urlencoded::byte_serialize(raw.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

// ---------------------------------------------------------------- routes

/// A POST/PUT route with a valid body; `{id}` is filled with a real id of `id_kind`.
struct BodyRoute {
    method: Method,
    path: &'static str,
    id_kind: Kind,
    valid: Value,
}

fn body_routes(f: &Fixtures) -> Vec<BodyRoute> {
    let loc = json!([f.slug]);
    let url =
        json!({"name": "u", "request": {"url": "http://127.0.0.1:9/"}, "privateLocations": loc});
    let api = json!({"name": "a", "request": {"method": "POST", "url": "http://127.0.0.1:9/",
        "body": "{}", "bodyType": "JSON", "headers": [{"key": "x", "value": "y"}],
        "assertions": [{"source": "STATUS_CODE", "comparison": "EQUALS", "target": "200"}]},
        "environmentVariables": [{"key": "K", "value": "v", "secret": true}],
        "privateLocations": loc, "frequency": 0, "frequencyOffset": 10, "tags": ["t"]});
    let tcp = json!({"name": "t", "request": {"hostname": "127.0.0.1", "port": 9, "data": "x",
        "assertions": [{"source": "RESPONSE_TIME", "comparison": "LESS_THAN", "target": "100"}]},
        "privateLocations": loc});
    let dns = json!({"name": "d", "request": {"query": "a.test", "recordType": "A",
        "nameServer": "127.0.0.1", "port": 53,
        "assertions": [{"source": "RESPONSE_CODE", "comparison": "EQUALS", "target": "NOERROR"}]},
        "privateLocations": loc});
    let icmp = json!({"name": "i", "request": {"hostname": "127.0.0.1", "pingCount": 3},
        "privateLocations": loc});
    let browser = json!({"name": "b", "script": "test('x', async () => {})", "runtimeId": "2025.04",
        "intent": {"goal": "g", "requiredOutcomes": ["o"]}, "privateLocations": loc});
    let heartbeat = json!({"name": "h", "heartbeat": {"period": 1, "periodUnit": "hours",
        "grace": 30, "graceUnit": "minutes"}, "alertChannelSubscriptions": []});
    let with_type = |mut v: Value, t: &str| {
        v["checkType"] = json!(t);
        v
    };
    let channel = json!({"type": "WEBHOOK", "config": {"name": "ops", "url": "http://127.0.0.1:9/hook",
        "webhookSecret": "s", "headers": [{"key": "X", "value": "y"}]}, "sendFailure": true});
    let email = json!({"type": "EMAIL", "config": {"address": "ops@example.com"}});
    let trigger = json!({"target": {"checkId": [f.of(Kind::Check)], "matchTags": [["t", "!u"]]},
        "refreshCache": false});
    let deploy = json!({"project": {"logicalId": "fuzz", "name": "Fuzz", "repoUrl": null},
        "sharedFiles": [], "repoInfo": null, "resources": [
            {"logicalId": "hb", "type": "check", "member": true, "payload": with_type(heartbeat.clone(), "HEARTBEAT")},
            {"logicalId": "ch", "type": "alert-channel", "member": true, "payload": email.clone()},
            {"logicalId": "sub", "type": "alert-channel-subscription", "member": true,
             "payload": {"alertChannelId": {"ref": "ch"}, "checkId": {"ref": "hb"}, "activated": true}}]});
    let service = json!({"name": "Fuzz service", "description": "d"});
    let page = json!({"name": "Fuzz page", "url": "fuzz-page", "description": "d",
        "defaultTheme": "AUTO", "isPrivate": false,
        "cards": [{"name": "Core", "services": [{"id": f.of(Kind::StatusService)}]}]});
    let mut page_put = page.clone();
    page_put["url"] = json!("fixture-page");
    let service_ref = json!({"id": f.of(Kind::StatusService), "name": "Fuzz service",
        "accountId": f.account});
    let incident = json!({"name": "Slow", "severity": "MAJOR", "services": [service_ref],
        "incidentUpdates": [{"description": "Looking into it", "status": "INVESTIGATING"}]});
    let incident_put = json!({"name": "Slower", "severity": "MINOR", "services": [service_ref],
        "lastUpdateStatus": "IDENTIFIED"});
    let update = json!({"description": "Fixed", "status": "RESOLVED", "notifySubscribers": false});
    let subscriptions = json!({"subscriptions": [{"type": "EMAIL", "config": "ops@example.com"},
        {"type": "WEBHOOK", "config": "http://127.0.0.1:9/status"}]});
    let r = |method: Method, path: &'static str, id_kind: Kind, valid: Value| BodyRoute {
        method,
        path,
        id_kind,
        valid,
    };
    vec![
        r(Method::POST, "/v1/checks/url", Kind::None, url.clone()),
        r(Method::POST, "/v1/checks/api", Kind::None, api.clone()),
        r(Method::POST, "/v1/checks/tcp", Kind::None, tcp.clone()),
        r(Method::POST, "/v1/checks/dns", Kind::None, dns.clone()),
        r(Method::POST, "/v1/checks/icmp", Kind::None, icmp.clone()),
        r(
            Method::POST,
            "/v1/checks/browser",
            Kind::None,
            browser.clone(),
        ),
        r(
            Method::POST,
            "/v1/checks/multistep",
            Kind::None,
            browser.clone(),
        ),
        r(
            Method::POST,
            "/v1/checks/heartbeat",
            Kind::None,
            heartbeat.clone(),
        ),
        r(
            Method::POST,
            "/v1/checks",
            Kind::None,
            with_type(api.clone(), "API"),
        ),
        r(
            Method::POST,
            "/v1/checks",
            Kind::None,
            with_type(browser.clone(), "BROWSER"),
        ),
        r(
            Method::POST,
            "/v1/checks",
            Kind::None,
            with_type(heartbeat.clone(), "HEARTBEAT"),
        ),
        r(Method::PUT, "/v1/checks/{id}", Kind::Check, url.clone()),
        r(
            Method::PUT,
            "/v1/checks/{id}",
            Kind::Heartbeat,
            heartbeat.clone(),
        ),
        r(Method::PUT, "/v1/checks/url/{id}", Kind::Check, url),
        r(Method::PUT, "/v1/checks/api/{id}", Kind::Typed("api"), api),
        r(Method::PUT, "/v1/checks/tcp/{id}", Kind::Typed("tcp"), tcp),
        r(Method::PUT, "/v1/checks/dns/{id}", Kind::Typed("dns"), dns),
        r(
            Method::PUT,
            "/v1/checks/icmp/{id}",
            Kind::Typed("icmp"),
            icmp,
        ),
        r(
            Method::PUT,
            "/v1/checks/browser/{id}",
            Kind::Browser,
            browser.clone(),
        ),
        r(
            Method::PUT,
            "/v1/checks/multistep/{id}",
            Kind::Typed("multistep"),
            browser,
        ),
        r(
            Method::PUT,
            "/v1/checks/heartbeat/{id}",
            Kind::Heartbeat,
            heartbeat,
        ),
        r(
            Method::POST,
            "/v1/check-sessions/trigger",
            Kind::None,
            trigger.clone(),
        ),
        r(
            Method::POST,
            "/v2/check-sessions/trigger",
            Kind::None,
            trigger,
        ),
        r(
            Method::POST,
            "/v1/check-sessions/{id}/cancel",
            Kind::Session,
            json!({"sequenceId": []}),
        ),
        r(
            Method::POST,
            "/v1/alert-channels",
            Kind::None,
            channel.clone(),
        ),
        r(Method::POST, "/v1/alert-channels", Kind::None, email),
        r(
            Method::PUT,
            "/v1/alert-channels/{id}",
            Kind::Channel,
            channel,
        ),
        r(
            Method::PUT,
            "/v1/alert-channels/{id}/subscriptions",
            Kind::Channel,
            json!({"checkId": f.of(Kind::Heartbeat), "activated": true}),
        ),
        r(
            Method::POST,
            "/v1/private-locations",
            Kind::None,
            json!({"name": "Fuzz", "slugName": "fuzz-loc", "icon": "location",
                   "proxyUrl": "http://fuzz:pass@127.0.0.1:3128"}),
        ),
        r(
            Method::PUT,
            "/v1/private-locations/{id}",
            Kind::Location,
            json!({"name": "Renamed", "icon": "location",
                   "proxyUrl": "https://fuzz:pass@proxy.example:8443/"}),
        ),
        r(
            Method::POST,
            "/v1/private-locations/{id}/keys",
            Kind::Location,
            json!({}),
        ),
        r(
            Method::POST,
            "/v1/status-pages/services",
            Kind::None,
            service.clone(),
        ),
        r(
            Method::PUT,
            "/v1/status-pages/services/{id}",
            Kind::StatusService,
            service,
        ),
        r(Method::POST, "/v1/status-pages", Kind::None, page.clone()),
        r(
            Method::PUT,
            "/v1/status-pages/{id}",
            Kind::StatusPage,
            page_put,
        ),
        r(
            Method::POST,
            "/v1/status-pages/{id}/subscriptions/bulk",
            Kind::StatusPage,
            subscriptions,
        ),
        r(
            Method::POST,
            "/v1/status-pages/incidents",
            Kind::None,
            incident,
        ),
        r(
            Method::PUT,
            "/v1/status-pages/incidents/{id}",
            Kind::Incident,
            incident_put,
        ),
        r(
            Method::POST,
            "/v1/status-pages/incidents/{id}/incident-updates",
            Kind::Incident,
            update.clone(),
        ),
        r(
            Method::PUT,
            "/v1/status-pages/incidents/{id}/incident-updates/{update}",
            Kind::Incident,
            update,
        ),
        r(
            Method::POST,
            "/v1/projects/deploy?dryRun=true",
            Kind::None,
            deploy.clone(),
        ),
        r(
            Method::POST,
            "/v1/projects/deploy?dryRun=false",
            Kind::None,
            deploy,
        ),
    ]
}

/// GET/PUT/DELETE routes whose path ids are fuzzed (`{}` = one id each).
const ID_ROUTES: &[(&str, &str, Kind)] = &[
    ("GET", "/v1/checks/{}", Kind::None),
    ("DELETE", "/v1/checks/{}", Kind::Check),
    ("PUT", "/v1/checks/{}", Kind::None),
    ("PUT", "/v1/checks/browser/{}", Kind::None),
    ("GET", "/v1/check-sessions/{}", Kind::None),
    ("GET", "/v2/check-sessions/{}", Kind::None),
    (
        "GET",
        "/v2/check-sessions/{}/completion?maxWaitSeconds=1",
        Kind::Session,
    ),
    ("POST", "/v1/check-sessions/{}/cancel", Kind::Session),
    ("GET", "/v1/check-results/{}", Kind::None),
    ("GET", "/v1/check-results/{}/{}", Kind::None),
    ("GET", "/v1/check-results/{}/{}/assets", Kind::None),
    ("GET", "/v1/check-results/{}/{}/assets/{}", Kind::None),
    ("GET", "/v1/checks/heartbeats/{}/events", Kind::None),
    ("GET", "/v1/checks/heartbeats/{}/events/{}", Kind::None),
    ("GET", "/v1/checks/heartbeats/{}/availability", Kind::None),
    ("GET", "/v1/alert-channels/{}", Kind::None),
    ("DELETE", "/v1/alert-channels/{}", Kind::Channel),
    ("GET", "/v1/private-locations/{}", Kind::None),
    ("DELETE", "/v1/private-locations/{}", Kind::Location),
    ("GET", "/v1/private-locations/{}/metrics", Kind::None),
    ("DELETE", "/v1/private-locations/{}/keys/{}", Kind::Location),
    ("GET", "/v1/status-pages/{}", Kind::None),
    ("PUT", "/v1/status-pages/{}", Kind::None),
    ("DELETE", "/v1/status-pages/{}", Kind::StatusPage),
    ("GET", "/v1/status-pages/{}/subscriptions", Kind::None),
    ("POST", "/v1/status-pages/{}/subscriptions/bulk", Kind::None),
    ("DELETE", "/v1/status-pages/{}/subscriptions/{}", Kind::None),
    ("GET", "/v1/status-pages/services/{}", Kind::None),
    ("PUT", "/v1/status-pages/services/{}", Kind::None),
    (
        "DELETE",
        "/v1/status-pages/services/{}",
        Kind::StatusService,
    ),
    ("GET", "/v1/status-pages/incidents/{}", Kind::None),
    ("PUT", "/v1/status-pages/incidents/{}", Kind::None),
    ("DELETE", "/v1/status-pages/incidents/{}", Kind::Incident),
    (
        "GET",
        "/v1/status-pages/incidents/{}/incident-updates",
        Kind::None,
    ),
    (
        "POST",
        "/v1/status-pages/incidents/{}/incident-updates",
        Kind::None,
    ),
    (
        "GET",
        "/v1/status-pages/incidents/{}/incident-updates/{}",
        Kind::None,
    ),
    (
        "PUT",
        "/v1/status-pages/incidents/{}/incident-updates/{}",
        Kind::None,
    ),
    (
        "DELETE",
        "/v1/status-pages/incidents/{}/incident-updates/{}",
        Kind::IncidentUpdate,
    ),
    ("GET", "/v1/status-pages/{}/keys", Kind::None),
    ("DELETE", "/v1/status-pages/{}/keys/{}", Kind::None),
    ("GET", "/v1/runtimes/{}", Kind::None),
    ("GET", "/next/accounts/{}", Kind::None),
    ("DELETE", "/v1/projects/{}", Kind::None),
    ("GET", "/v1/projects/{}/deployments/{}/events", Kind::None),
];

/// GET routes whose query strings are fuzzed.
const QUERY_ROUTES: &[&str] = &[
    "/v1/checks",
    "/v1/check-results/{check}",
    "/v1/check-results/{check}/{check}/assets",
    "/v1/alert-channels",
    "/v1/private-locations",
    "/v1/checks/heartbeats/{heartbeat}/events",
    "/v1/checks/heartbeats/{heartbeat}/availability",
    "/v1/locations",
    "/v1/runtimes",
    "/v1/status-pages",
    "/v1/status-pages/services",
    "/v1/status-pages/incidents",
    "/v1/status-pages/{page}/subscriptions",
    "/v1/status-pages/incidents/{incident}/incident-updates",
];

const QUERY_KEYS: &[&str] = &[
    "limit",
    "page",
    "from",
    "to",
    "location",
    "checkType",
    "hasFailures",
    "resultType",
    "type",
    "name",
    "tag",
    "search",
    "filter",
    "nextId",
    "maxWaitSeconds",
    "cursor",
    "status",
];

// ---------------------------------------------------------------- setup

fn setup(serve: &Serve, dir: &std::path::Path) -> Env {
    let creds: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("credentials.json")).unwrap())
            .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .unwrap();
    let mut env = Env {
        rt,
        http,
        base: serve.base.clone(),
        key: creds["apiKey"].as_str().unwrap().to_owned(),
        account: creds["accountId"].as_str().unwrap().to_owned(),
        fixtures: Fixtures {
            ids: Vec::new(),
            slug: creds["privateLocation"].as_str().unwrap().to_owned(),
            account: creds["accountId"].as_str().unwrap().to_owned(),
        },
        seen: Default::default(),
    };
    let loc = json!([env.fixtures.slug]);
    let check = env.json(
        Method::POST,
        "/v1/checks/url",
        &json!({"name": "fixture", "request": {"url": "http://127.0.0.1:9/"}, "privateLocations": loc, "tags": ["t"]}),
    );
    let browser = env.json(
        Method::POST,
        "/v1/checks/browser",
        &json!({"name": "fixture", "script": "x", "privateLocations": loc}),
    );
    let heartbeat = env.json(
        Method::POST,
        "/v1/checks/heartbeat",
        &json!({"name": "hb", "heartbeat": {"period": 1, "periodUnit": "hours", "grace": 1, "graceUnit": "hours"}}),
    );
    let channel = env.json(
        Method::POST,
        "/v1/alert-channels",
        &json!({"type": "EMAIL", "config": {"address": "ops@example.com"}}),
    );
    let location = env.json(
        Method::POST,
        "/v1/private-locations",
        &json!({"name": "Second", "slugName": "second"}),
    );
    let session = env.json(
        Method::POST,
        "/v2/check-sessions/trigger",
        &json!({"target": {"checkId": [check["id"]]}}),
    );
    let status_service = env.json(
        Method::POST,
        "/v1/status-pages/services",
        &json!({"name": "Fixture service"}),
    );
    let status_page = env.json(
        Method::POST,
        "/v1/status-pages",
        &json!({"name": "Fixture page", "url": "fixture-page",
            "cards": [{"name": "Core", "services": [{"id": status_service["id"]}]}]}),
    );
    let incident = env.json(
        Method::POST,
        "/v1/status-pages/incidents",
        &json!({"name": "Fixture incident", "severity": "MINOR",
            "services": [{"id": status_service["id"], "name": "Fixture service",
                "accountId": env.account}],
            "incidentUpdates": [{"description": "Looking into it"}]}),
    );
    let id = |v: &Value| match &v["id"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut typed = Vec::new();
    for route in body_routes(&env.fixtures) {
        if let (true, Kind::Typed(segment)) = (route.method == Method::PUT, route.id_kind) {
            let created = env.json(Method::POST, &format!("/v1/checks/{segment}"), &route.valid);
            typed.push((Kind::Typed(segment), id(&created)));
        }
    }
    env.fixtures.ids = vec![
        (Kind::Check, id(&check)),
        (Kind::Browser, id(&browser)),
        (Kind::Heartbeat, id(&heartbeat)),
        (Kind::Channel, id(&channel)),
        (Kind::Location, id(&location)),
        (Kind::StatusService, id(&status_service)),
        (Kind::StatusPage, id(&status_page)),
        (Kind::Incident, id(&incident)),
        (Kind::IncidentUpdate, id(&incident["incidentUpdates"][0])),
        (
            Kind::Session,
            session["sessions"][0]["checkSessionId"]
                .as_str()
                .unwrap()
                .to_owned(),
        ),
    ];
    env.fixtures.ids.extend(typed);
    env
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 300,
        ..Config::default()
    })
}

fn outcome<T: std::fmt::Debug>(
    what: &str,
    result: Result<(), TestError<T>>,
    failures: &mut Vec<String>,
) {
    if let Err(e) = result {
        failures.push(format!("{what}: {e}"));
    }
}

#[test]
fn no_input_makes_the_api_fail() {
    let cases: u32 = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path());
    let env = setup(&serve, dir.path());
    let mut failures = Vec::new();

    for route in body_routes(&env.fixtures) {
        let path = route
            .path
            .replace("{id}", &env.fixtures.of(route.id_kind))
            .replace("{update}", &env.fixtures.of(Kind::IncidentUpdate));
        let what = format!("{} {path}", route.method);
        // A 2 MB body is refused (413 beyond the 1 MiB limit of API bodies; deploys have
        // their own) with an answer that reaches the client, even on a route that has no
        // use for a body, and the next request on the connection is answered too.
        let big = format!("{{\"name\": \"{}\"}}", "x".repeat(2_000_000)).into_bytes();
        match env.send(route.method.clone(), &path, Some(big)) {
            Ok(a) if (400..500).contains(&a.status) => {
                if let Err(e) = judge(&what, &a) {
                    failures.push(format!("{what}: oversized body: {e}"));
                }
            }
            Ok(a) => failures.push(format!("{what}: oversized body got {}", a.status)),
            Err(e) => failures.push(format!("{what}: oversized body: {e}")),
        }
        // The valid body is valid: mutations start from something the route accepts.
        let plain = env
            .send(
                route.method.clone(),
                &path,
                Some(route.valid.to_string().into_bytes()),
            )
            .unwrap();
        if plain.status >= 300 {
            failures.push(format!(
                "{what}: the valid body got {} {}",
                plain.status,
                String::from_utf8_lossy(&plain.body)
            ));
        }
        let result = runner(cases).run(&(body_case(), body_headers()), |(case, headers)| {
            let body = render(&route.valid, &case);
            let answer = env
                .send_with(route.method.clone(), &path, Some(body), &headers)
                .map_err(TestCaseError::fail)?;
            env.count(&what, answer.status);
            judge(&what, &answer)
        });
        outcome(&what, result, &mut failures);
    }

    let all_real: Vec<(Kind, String)> = env.fixtures.ids.clone();
    for (method, template, own) in ID_ROUTES {
        let real: Vec<String> = all_real
            .iter()
            .filter(|(k, _)| !own.covers(*k))
            .map(|(_, id)| id.clone())
            .collect();
        let holes = template.matches("{}").count();
        let method: Method = method.parse().unwrap();
        let what = format!("{method} {template}");
        let strategy = (
            prop::collection::vec(path_id(real), holes..=holes),
            prop::option::of(arb_json()),
        );
        let result = runner(cases).run(&strategy, |(ids, body)| {
            let mut path = (*template).to_owned();
            for id in &ids {
                path = path.replacen("{}", &segment(id), 1);
            }
            let body = match (&method, body) {
                (&Method::GET | &Method::DELETE, _) | (_, None) => None,
                (_, Some(b)) => Some(b.to_string().into_bytes()),
            };
            let answer = env
                .send(method.clone(), &path, body)
                .map_err(TestCaseError::fail)?;
            env.count(&what, answer.status);
            judge(&format!("{method} {path}"), &answer)
        });
        outcome(&what, result, &mut failures);
    }

    for template in QUERY_ROUTES {
        let path = template
            .replace("{check}", &env.fixtures.of(Kind::Check))
            .replace("{heartbeat}", &env.fixtures.of(Kind::Heartbeat))
            .replace("{page}", &env.fixtures.of(Kind::StatusPage))
            .replace("{incident}", &env.fixtures.of(Kind::Incident));
        let strategy = prop::collection::vec(
            (prop::sample::select(QUERY_KEYS), path_id(Vec::new())),
            0..5,
        );
        let result = runner(cases).run(&strategy, |pairs| {
            let query: String = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())))
                .finish();
            let full = format!("{path}?{query}");
            let answer = env
                .send(Method::GET, &full, None)
                .map_err(TestCaseError::fail)?;
            env.count(&format!("GET {path}?..."), answer.status);
            judge(&format!("GET {full}"), &answer)
        });
        outcome(&format!("GET {path}?..."), result, &mut failures);
    }

    for (route, statuses) in env.seen.borrow().iter() {
        println!("{route}: {statuses:?}");
    }
    // The service is still up and answering after all of it.
    let alive = env.send(Method::GET, "/v1/checks", None).unwrap();
    assert_eq!(alive.status, 200);
    drop(serve);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
