//! The ping address: GET and POST record, other methods do not; unknown and garbage
//! tokens are 404; link-preview bots are ignored; source and User-Agent are kept;
//! bodies are capped while streaming; concurrent pings are all committed.

mod heartbeat_support;
mod service_support;

use bytes::Bytes;
use heartbeat_support::*;
use reqwest::{Method, StatusCode};
use serde_json::json;
use service_support::TestService;

/// Events recorded in the last 24 hours (all of a test's pings).
async fn recorded(svc: &TestService, id: &str) -> i64 {
    events(svc, id, "").await["stats"]["last24Hours"]["totalEntitiesCurrentPeriod"]
        .as_i64()
        .unwrap()
}

#[tokio::test]
async fn get_and_post_record_other_methods_do_not() {
    let (svc, clock) = start_manual().await;
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("m", 60, 0)).await);
    assert_eq!(
        ping(&svc, &url, Method::GET).await,
        (StatusCode::OK, "OK".to_owned())
    );
    clock.advance(std::time::Duration::from_secs(40));
    assert_eq!(
        ping(&svc, &url, Method::POST).await,
        (StatusCode::OK, "OK".to_owned())
    );
    for method in [Method::PUT, Method::DELETE, Method::PATCH, Method::HEAD] {
        let (status, _) = ping(&svc, &url, method.clone()).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
    }
    let resp = svc.http.put(&url).send().await.unwrap();
    service_support::error_body(resp, StatusCode::METHOD_NOT_ALLOWED).await;
    assert_eq!(states(&svc, &id, "").await, ["RECEIVED", "RECEIVED"]);
    let item = events(&svc, &id, "").await;
    assert_eq!(
        item["stats"]["last24Hours"]["totalEntitiesCurrentPeriod"],
        2
    );
    svc.stop().await;
}

#[tokio::test]
async fn unknown_and_garbage_tokens_are_404() {
    let (svc, _clock) = start_manual().await;
    let (_, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("m", 60, 0)).await);
    let token = url.rsplit('/').next().unwrap();
    let mut unknown = token.to_owned();
    unknown.replace_range(0..1, if token.starts_with('A') { "B" } else { "A" });
    let long = "a".repeat(5000);
    let paths = [
        format!("/ping/{unknown}"),
        "/ping/x".to_owned(),
        "/ping/".to_owned(),
        "/ping".to_owned(),
        format!("/ping/{token}/extra"),
        format!("/ping/{}%00", &token[..31]),
        format!("/ping/{}%2F", &token[..29]),
        "/ping/..%2F..%2Fetc%2Fpasswd".to_owned(),
        format!("/ping/{long}"),
        "/ping/%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9".to_owned(),
        "/ping/%ZZ".to_owned(),
    ];
    for path in paths {
        for method in [Method::GET, Method::POST] {
            let resp = svc
                .http
                .request(method.clone(), format!("{}{path}", svc.base))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{method} {path}");
        }
    }
    // The real token still works.
    assert_eq!(ping(&svc, &url, Method::POST).await.0, StatusCode::OK);
    svc.stop().await;
}

#[tokio::test]
async fn link_preview_bots_are_answered_and_ignored() {
    let (svc, _clock) = start_manual().await;
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("m", 60, 0)).await);
    for ua in [
        "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
        "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
        "Twitterbot/1.0",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "facebookexternalhit/1.1 Facebot",
        "TelegramBot (like TwitterBot)",
        "WhatsApp/2.23.20.0",
        "LinkedInBot/1.0",
    ] {
        let (status, body) = ping_with(&svc, &url, Method::GET, &[("user-agent", ua)], None).await;
        assert_eq!(status, StatusCode::OK, "{ua}");
        assert!(body.contains("ignored"), "{ua}: {body}");
    }
    assert_eq!(recorded(&svc, &id).await, 0);
    let (status, body) = ping_with(
        &svc,
        &url,
        Method::GET,
        &[("user-agent", "curl/8.5.0")],
        None,
    )
    .await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "OK"));
    assert_eq!(recorded(&svc, &id).await, 1);
    svc.stop().await;
}

#[tokio::test]
async fn source_and_user_agent_are_kept_and_bounded() {
    let (svc, clock) = start_manual().await;
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("m", 60, 0)).await);
    let long_ua = format!("cron-runner/{}", "x".repeat(2000));
    let pings: [&[(&str, &str)]; 4] = [
        &[
            ("origin", "https://ci.example.com"),
            ("referer", "https://ignored.example.com/page"),
            ("user-agent", "curl/8.5.0"),
        ],
        &[
            ("referer", "https://jobs.example.com/run/7"),
            ("user-agent", "Wget/1.21"),
        ],
        &[("user-agent", long_ua.as_str())],
        &[],
    ];
    for headers in pings {
        clock.advance(std::time::Duration::from_secs(1));
        assert_eq!(
            ping_with(&svc, &url, Method::POST, headers, None).await.0,
            StatusCode::OK
        );
    }
    let item = events(&svc, &id, "").await;
    let listed = item["events"].as_array().unwrap();
    // Newest first.
    assert_eq!(listed[3]["source"], "https://ci.example.com");
    assert_eq!(listed[3]["userAgent"], "curl/8.5.0");
    assert_eq!(listed[2]["source"], "https://jobs.example.com/run/7");
    assert_eq!(listed[2]["userAgent"], "Wget/1.21");
    assert_eq!(listed[1]["source"], serde_json::Value::Null);
    let kept = listed[1]["userAgent"].as_str().unwrap();
    assert_eq!(kept.chars().count(), 512);
    assert!(long_ua.starts_with(kept));
    // reqwest sends no User-Agent by default.
    assert_eq!(listed[0]["userAgent"], serde_json::Value::Null);
    assert_eq!(listed[0]["source"], serde_json::Value::Null);
    svc.stop().await;
}

/// The lengths of the stored bodies, oldest first.
async fn stored_body_lengths(svc: &TestService) -> Vec<Option<i64>> {
    let db = svc.dir.path().join("outpost.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .read_only(true);
    let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
    let lengths: Vec<Option<i64>> =
        sqlx::query_scalar("SELECT length(body) FROM heartbeat_events ORDER BY ts, id")
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;
    lengths
}

#[tokio::test]
async fn bodies_are_kept_up_to_10_kb_and_refused_beyond_1_mb() {
    let (svc, clock) = start_manual().await;
    let (id, url) = id_and_url(&create_heartbeat(&svc, heartbeat_body("m", 60, 0)).await);
    let small = b"backup done: 42 files".to_vec();
    assert_eq!(
        ping_with(&svc, &url, Method::POST, &[], Some(small.clone()))
            .await
            .0,
        StatusCode::OK
    );
    clock.advance(std::time::Duration::from_secs(1));
    let big = vec![b'y'; 20 * 1024];
    assert_eq!(
        ping_with(&svc, &url, Method::POST, &[], Some(big)).await.0,
        StatusCode::OK
    );

    // Declared too large: refused before reading.
    clock.advance(std::time::Duration::from_secs(1));
    let huge = vec![b'z'; 1024 * 1024 + 1];
    let resp = svc.http.post(&url).body(huge).send().await.unwrap();
    service_support::error_body(resp, StatusCode::PAYLOAD_TOO_LARGE).await;
    // Streamed without a length: refused once the cap is crossed.
    let chunks: Vec<Result<Bytes, std::io::Error>> = (0..40)
        .map(|_| Ok(Bytes::from(vec![b'w'; 64 * 1024])))
        .collect();
    let resp = svc
        .http
        .post(&url)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await;
    match resp {
        Ok(resp) => assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE),
        // The server may answer and close while the client is still sending.
        Err(e) => assert!(e.is_request() || e.is_body(), "{e}"),
    }
    assert_eq!(recorded(&svc, &id).await, 2);
    assert_eq!(
        stored_body_lengths(&svc).await,
        [Some(small.len() as i64), Some(10 * 1024)]
    );
    svc.stop().await;
}

#[tokio::test]
async fn concurrent_pings_are_all_committed() {
    let (svc, _clock) = start_manual().await;
    let mut monitors = Vec::new();
    for i in 0..3 {
        monitors.push(id_and_url(
            &create_heartbeat(&svc, heartbeat_body(&format!("m{i}"), 60, 0)).await,
        ));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..300 {
        let (_, url) = monitors[n % 3].clone();
        let http = svc.http.clone();
        tasks.spawn(async move {
            let resp = http.post(&url).send().await.unwrap();
            (resp.status(), resp.text().await.unwrap())
        });
    }
    while let Some(answer) = tasks.join_next().await {
        assert_eq!(answer.unwrap(), (StatusCode::OK, "OK".to_owned()));
    }
    for (id, _) in &monitors {
        assert_eq!(recorded(&svc, id).await, 100);
        // All arrived at the same (manual) instant: the first started the timer.
        let item = events(&svc, id, "").await;
        assert!(
            item["events"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| { e["state"] == json!("RECEIVED") || e["state"] == json!("EARLY") })
        );
    }
    svc.stop().await;
}
