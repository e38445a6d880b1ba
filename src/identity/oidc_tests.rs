//! Token checks against an issuer served by the test itself (discovery and JWKS over HTTP),
//! with Ed25519 and P-256 keys made by ring; the tests against a real OpenID provider are in
//! tests/api/identity.rs.

use std::sync::atomic::{AtomicUsize, Ordering};

use jsonwebtoken::{EncodingKey, Header, encode};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};
use serde_json::json;

use super::*;

const AUDIENCE: &str = "https://agentd.test";

struct TestIssuer {
    url: String,
    ed_der: Vec<u8>,
    ec_der: Vec<u8>,
    ed_public: Vec<u8>,
    jwks_fetches: Arc<AtomicUsize>,
    /// The JWKS served; tests replace it to rotate keys.
    jwks: Arc<Mutex<Value>>,
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

async fn test_issuer() -> TestIssuer {
    let rng = SystemRandom::new();
    let ed_der = Ed25519KeyPair::generate_pkcs8(&rng)
        .expect("ed")
        .as_ref()
        .to_vec();
    let ed = Ed25519KeyPair::from_pkcs8(&ed_der).expect("ed");
    let ec_der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .expect("ec")
        .as_ref()
        .to_vec();
    let ec = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &ec_der, &rng).expect("ec");
    let point = ec.public_key().as_ref();
    let jwks = json!({"keys": [
        {"kty": "OKP", "crv": "Ed25519", "x": b64(ed.public_key().as_ref()), "kid": "ed", "use": "sig"},
        {"kty": "EC", "crv": "P-256", "x": b64(&point[1..33]), "y": b64(&point[33..65]), "kid": "ec"},
        {"kty": "oct", "k": b64(b"a shared secret"), "kid": "hmac"},
    ]});
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let jwks = Arc::new(Mutex::new(jwks));
    let jwks_fetches = Arc::new(AtomicUsize::new(0));
    let discovery = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
    let (served, fetches) = (Arc::clone(&jwks), Arc::clone(&jwks_fetches));
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            axum::routing::get(move || async move { axum::Json(discovery) }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || async move {
                fetches.fetch_add(1, Ordering::SeqCst);
                let body = served.lock().expect("jwks").clone();
                axum::Json(body)
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    TestIssuer {
        url,
        ed_public: ed.public_key().as_ref().to_vec(),
        ed_der,
        ec_der,
        jwks_fetches,
        jwks,
    }
}

impl TestIssuer {
    fn issuers(&self) -> Issuers {
        Issuers::new(&[OidcIssuerConfig {
            issuer: self.url.clone(),
            audience: AUDIENCE.into(),
            user_claim: "sub".into(),
            scopes_claim: "scope".into(),
            admin_scope: "agentd:admin".into(),
            page_client_id: None,
        }])
    }

    fn claims(&self) -> Value {
        let now = chrono::Utc::now().timestamp();
        json!({"iss": self.url, "aud": AUDIENCE, "sub": "alice", "exp": now + 300, "nbf": now - 5,
               "scope": "openid agents:team-*:run runs:read"})
    }

    fn ed_token(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("ed".into());
        encode(&header, claims, &EncodingKey::from_ed_der(&self.ed_der)).expect("sign")
    }

    fn ec_token(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("ec".into());
        encode(&header, claims, &EncodingKey::from_ec_der(&self.ec_der)).expect("sign")
    }
}

/// A token with this header, these claims and this signature, assembled by hand.
fn forged(header: &Value, claims: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(signature)
    )
}

#[tokio::test]
async fn tokens_of_each_algorithm_name_their_user_and_scopes() {
    let issuer = test_issuer().await;
    let issuers = issuer.issuers();
    for token in [
        issuer.ed_token(&issuer.claims()),
        issuer.ec_token(&issuer.claims()),
    ] {
        let identity = issuers.verify(&token).await.expect("valid");
        assert_eq!(identity.user, "alice");
        assert!(identity.grants.may_run("team-a") && !identity.grants.may_run("chat"));
        assert!(identity.grants.runs_read && !identity.grants.admin);
    }
    let mut admin = issuer.claims();
    admin["scope"] = json!(["agentd:admin"]);
    let identity = issuers
        .verify(&issuer.ed_token(&admin))
        .await
        .expect("admin");
    assert!(identity.grants.admin);
}

#[tokio::test]
async fn bad_tokens_are_refused_naming_what_is_wrong() {
    let issuer = test_issuer().await;
    let issuers = issuer.issuers();
    let now = chrono::Utc::now().timestamp();
    let with = |field: &str, value: Value| {
        let mut claims = issuer.claims();
        claims[field] = value;
        issuer.ed_token(&claims)
    };
    let cases = [
        (with("exp", json!(now - 61)), TokenRefusal::Expired),
        (with("nbf", json!(now + 120)), TokenRefusal::NotYetValid),
        (
            with("aud", json!("https://elsewhere.test")),
            TokenRefusal::WrongAudience(AUDIENCE.into()),
        ),
        (
            with("iss", json!("https://unknown.test")),
            TokenRefusal::UnknownIssuer,
        ),
        (
            with("sub", json!("key:ci")),
            TokenRefusal::BadUser {
                claim: "sub".into(),
                message: String::new(),
            },
        ),
        ("eyJhbGciOi.e30".to_string(), TokenRefusal::Malformed),
    ];
    for (token, expected) in cases {
        let refused = issuers.verify(&token).await.expect_err("refused");
        match (&refused, &expected) {
            (TokenRefusal::BadUser { claim, .. }, TokenRefusal::BadUser { claim: want, .. }) => {
                assert_eq!(claim, want);
            }
            _ => assert_eq!(refused, expected),
        }
        assert!(!refused.to_string().contains(&token), "never the token");
    }
    // Within the leeway: expired 30 s ago, valid from 30 s on.
    assert!(issuers.verify(&with("exp", json!(now - 30))).await.is_ok());
    assert!(issuers.verify(&with("nbf", json!(now + 30))).await.is_ok());
    // A signature of another key: the message does not say what failed inside.
    let mut token = issuer.ed_token(&issuer.claims());
    let other = test_issuer().await;
    let foreign = other.ed_token(&issuer.claims());
    token.replace_range(
        token.rfind('.').expect("dot")..,
        &foreign[foreign.rfind('.').expect("dot")..],
    );
    assert_eq!(
        issuers.verify(&token).await,
        Err(TokenRefusal::BadSignature)
    );
}

#[tokio::test]
async fn none_and_hmac_with_the_public_key_are_refused() {
    let issuer = test_issuer().await;
    let issuers = issuer.issuers();
    let claims = issuer.claims();
    let unsigned = forged(&json!({"alg": "none", "kid": "ed"}), &claims, b"");
    assert_eq!(issuers.verify(&unsigned).await, Err(TokenRefusal::Unsigned));
    // HS256 keyed with the published public key (algorithm confusion), and with the JWKS's
    // own `oct` key: both refused before any signature is computed.
    for kid in ["ed", "hmac"] {
        let header = json!({"alg": "HS256", "kid": kid});
        let signing_input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &issuer.ed_public);
        let tag = ring::hmac::sign(&key, signing_input.as_bytes());
        let token = format!("{signing_input}.{}", b64(tag.as_ref()));
        assert!(
            matches!(issuers.verify(&token).await, Err(TokenRefusal::UnsupportedAlgorithm(alg)) if alg == "HS256")
        );
    }
    // An EdDSA token naming the P-256 key: the key's own algorithm decides.
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some("ec".into());
    let token = encode(&header, &claims, &EncodingKey::from_ed_der(&issuer.ed_der)).expect("sign");
    assert!(matches!(
        issuers.verify(&token).await,
        Err(TokenRefusal::UnsupportedAlgorithm(_))
    ));
}

#[tokio::test]
async fn an_unknown_key_id_refetches_the_keys_at_most_once_a_minute() {
    let issuer = test_issuer().await;
    let issuers = issuer.issuers();
    let token = issuer.ed_token(&issuer.claims());
    issuers
        .verify(&token)
        .await
        .expect("first use loads the keys");
    assert_eq!(issuer.jwks_fetches.load(Ordering::SeqCst), 1);
    for _ in 0..50 {
        issuers.verify(&token).await.expect("cached");
    }
    assert_eq!(
        issuer.jwks_fetches.load(Ordering::SeqCst),
        1,
        "no network call per token"
    );
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some("rotated".into());
    let rotated = encode(
        &header,
        &issuer.claims(),
        &EncodingKey::from_ed_der(&issuer.ed_der),
    )
    .expect("sign");
    for _ in 0..5 {
        assert_eq!(
            issuers.verify(&rotated).await,
            Err(TokenRefusal::UnknownKey)
        );
    }
    assert_eq!(
        issuer.jwks_fetches.load(Ordering::SeqCst),
        1,
        "fetched less than a minute ago"
    );
    // A minute later the issuer publishes the new key: one refetch finds it.
    {
        let mut jwks = issuer.jwks.lock().expect("jwks");
        jwks["keys"][0]["kid"] = json!("rotated");
    }
    let issuer_state = &issuers.issuers[0];
    *issuer_state.fetched_at.lock().expect("at") = Some(Instant::now() - REFETCH_EVERY);
    issuers.verify(&rotated).await.expect("the rotated key");
    assert_eq!(issuer.jwks_fetches.load(Ordering::SeqCst), 2);
}
