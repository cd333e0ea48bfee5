//! Test-only helpers shared by toolbrake's crates: the property-test strategies the
//! fuzz tests of the protocol, the hooks and the MCP proxy draw their inputs from, and
//! the credential cases the redaction table test (`toolbrake-core`) and the surface test
//! (`crates/toolbrake/tests/redaction_surfaces.rs`) share. A dev-dependency only;
//! nothing at run time depends on it.

use proptest::prelude::*;
use serde_json::{json, Value};

/// Small JSON values of every kind, nested up to 4 levels: nulls, booleans, integers,
/// short strings, arrays and objects.
pub fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        "[a-z0-9 ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One credential in the text around it: `secret` must not survive redaction. `row` names
/// the row of `toolbrake_core::redact`'s tables (`KEY_NAMES` or `SHAPES`) it exercises.
/// Secrets hold no character JSON or HTML would escape, so every surface can be searched
/// for them as they are.
#[derive(Clone, Copy, Debug)]
pub struct CredentialCase {
    pub row: &'static str,
    pub text: &'static str,
    pub secret: &'static str,
}

const fn case(row: &'static str, text: &'static str, secret: &'static str) -> CredentialCase {
    CredentialCase { row, text, secret }
}

/// Every credential shape toolbrake redacts, at least one case per table row: the unit
/// table of `toolbrake-core` and the surface tests of the binary share it.
pub const CREDENTIAL_CASES: &[CredentialCase] = &[
    // Key names, in every syntax a value follows a name.
    case("password", "DB_PASSWORD=Tr0ub4dor3x ./migrate", "Tr0ub4dor3x"),
    case("password", r#"{"user": "bob", "password": "JsonPassw0rd1"}"#, "JsonPassw0rd1"),
    case("password", "mysql --password=MysqlFlagPw1 shop", "MysqlFlagPw1"),
    // A .netrc entry: on one line, one token a line, and as a JSON string holds it.
    case("password", "machine api.example.com login bob password NetrcPw0123", "NetrcPw0123"),
    case("password", "machine github.com\n  login bob\n  password NetrcLinePw45\n", "NetrcLinePw45"),
    case("password", r#"{"command":"cat > ~/.netrc <<EOF\nmachine h.example.com\nlogin bob\npassword NetrcJsonPw67\nEOF"}"#, "NetrcJsonPw67"),
    case("password", "default login anonymous password NetrcDefaultPw8", "NetrcDefaultPw8"),
    case("password", "git config --global user.password GitCfgPw0123", "GitCfgPw0123"),
    case("password", "db:\n  password: Yaml Pass Phrase9\n  host: db", "Yaml Pass Phrase9"),
    case("password", "{\n  \"dbPassword\":\n    \"PrettyJsonPw2\"\n}", "PrettyJsonPw2"),
    case(
        "password",
        r#"{"command":"{\n  \"dbPassword\":\n    \"EscPrettyPw3\"\n}"}"#,
        "EscPrettyPw3",
    ),
    case(
        "password",
        r#"{"a":"{\"b\":\"{\\\"password\\\":\\\"TwiceEscPw4\\\"}\"}"}"#,
        "TwiceEscPw4",
    ),
    case("passwd", "smbclient //srv/share --passwd=Passwd4Smb", "Passwd4Smb"),
    case("passphrase", r#"{"passphrase": "correct-horse-battery3"}"#, "correct-horse-battery3"),
    case("pgpassword", "PGPASSWORD=PgS3cretPw psql -h db -U app", "PgS3cretPw"),
    case("pass", r#"{"user": "bob", "pass": "PassW0rdX9"}"#, "PassW0rdX9"),
    case("pass", "SMTP_PASS=SmtpPassVal4 ./mail", "SmtpPassVal4"),
    case("sshpass", "SSHPASS=SshP4ssEnv sshpass -e ssh host", "SshP4ssEnv"),
    case("pwd", "MYSQL_PWD=MyPwdS3cret mysql -u root", "MyPwdS3cret"),
    case("secret", "aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYFAKEKEY", "wJalrXUtnFEMIK7MDENGbPxRfiCYFAKEKEY"),
    case("secret", "client_secret=0f9e8d7c6b5a4f3e2d1c", "0f9e8d7c6b5a4f3e2d1c"),
    case("secret", "aws configure set aws_secret_access_key AwsCfgSecret0123", "AwsCfgSecret0123"),
    case("secret", "aws configure set default.aws_secret_access_key AwsCfgDefault45 --profile dev", "AwsCfgDefault45"),
    case("token", "GITHUB_TOKEN=GhTokenValue123 gh pr list", "GhTokenValue123"),
    case("token", "//registry.npmjs.org/:_authToken=NpmAuthT0kenValue", "NpmAuthT0kenValue"),
    case("token", "gh auth login --token FlagToken1234", "FlagToken1234"),
    case("token", "npm config set //registry.example.com/:_authToken NpmCfgTok0123", "NpmCfgTok0123"),
    case("token", "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=NpmrcTok4567\nalways-auth=true", "NpmrcTok4567"),
    case("token", "aws configure set aws_session_token AwsCfgSessTok89", "AwsCfgSessTok89"),
    case("token", r#"{"command":"export API_TOKEN=\"EscTok123\" && deploy"}"#, "EscTok123"),
    case("token", "https://api.example.com/v1?access_token=QueryTok456&page=2", "QueryTok456"),
    case("api_key", "export OPENAI_API_KEY=\"OpenAiKeyValue42\"", "OpenAiKeyValue42"),
    case("api_key", "curl -H 'X-Api-Key: XApiKeyValue77' https://api.example.com", "XApiKeyValue77"),
    case("api_key", r#"{"X-Api-Key": "XApiKeyJson88"}"#, "XApiKeyJson88"),
    case("api_key", r#"{"apiKey": "CamelApiKey55"}"#, "CamelApiKey55"),
    case("api_key", r#"{"args": ["--api-key", "ArgvApiKey77"]}"#, "ArgvApiKey77"),
    case("apikey", "https://api.example.com/v1?apikey=QueryApiKey66", "QueryApiKey66"),
    case("access_key", "AWS_ACCESS_KEY=AccessKeyVal12", "AccessKeyVal12"),
    case("private_key", r#"{"private_key": "PrivKeyValue34"}"#, "PrivKeyValue34"),
    case("encryption_key", "ENCRYPTION_KEY=EncKeyValue56", "EncKeyValue56"),
    case("signing_key", "release --signing-key SignKeyValue78", "SignKeyValue78"),
    case("master_key", "RAILS_MASTER_KEY=MasterKeyVal90", "MasterKeyVal90"),
    case("account_key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=AzureAcctKey12==;EndpointSuffix=core.windows.net", "AzureAcctKey12"),
    case("credential", "https://b.s3.amazonaws.com/o?X-Amz-Credential=AmzCredVal99&X-Amz-Date=1", "AmzCredVal99"),
    case("credentials", r#"{"credentials": "user:CredsVal31"}"#, "CredsVal31"),
    case("authorization", "curl -H \"Authorization: token AuthzTok3n44\" https://api.github.com", "AuthzTok3n44"),
    case("authorization", r#"{"headers": {"Authorization": "Bearer JsonBearer55x"}}"#, "JsonBearer55x"),
    case("authorization", "Proxy-Authorization: Digest ProxyDigest66", "ProxyDigest66"),
    case("cookie", "Cookie: session=CookieSess66; theme=dark", "CookieSess66"),
    case("cookie", r#"{"Set-Cookie": "sid=SetCookie77; Path=/"}"#, "SetCookie77"),
    case("auth", r#"{"auths": {"registry.io": {"auth": "dXNlcjpEb2NrZXJBdXRo"}}}"#, "dXNlcjpEb2NrZXJBdXRo"),
    case("dsn", "SENTRY_DSN=https://SentryKey123@o1.ingest.sentry.io/42", "SentryKey123"),
    case("key", "https://maps.example.com/api?key=QueryKeyVal88&q=x", "QueryKeyVal88"),
    case("code", "https://app.example.com/callback?code=OauthCode99&state=x", "OauthCode99"),
    case("sig", "https://x.blob.core.windows.net/c/b?sv=2020&sig=AzureSig00x", "AzureSig00x"),
    case("signature", "https://cdn.example.com/f?Signature=CdnSignature11&Expires=1", "CdnSignature11"),
    case("amz_signature", "https://b.s3.amazonaws.com/o?X-Amz-Date=1&X-Amz-Signature=AmzSigVal77", "AmzSigVal77"),
    case("session_id", "https://shop.example.com/cart?session_id=SessIdVal22", "SessIdVal22"),
    case("sessionid", "https://shop.example.com/cart?sessionid=SessIdVal33", "SessIdVal33"),
    // Shapes, wherever they appear.
    case("pem private key", "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEPemBody\n-----END OPENSSH PRIVATE KEY-----\n", "b3BlbnNzaC1rZXktdjEPemBody"),
    case("pem private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEARsaBody\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEARsaBody"),
    case("bearer", "the request sent Bearer BareBearer9x8y7z upstream", "BareBearer9x8y7z"),
    case("basic", "proxy sent Basic dXNlcjpCYXNpY1Bhc3M= upstream", "dXNlcjpCYXNpY1Bhc3M"),
    case("sk-", "using sk-proj-FakeOpenAi0123456789abcdef now", "FakeOpenAi0123456789abcdef"),
    case("sk-", "key sk-ant-api03-FakeAnthropic0123456789 set", "FakeAnthropic0123456789"),
    case("github", "pushed with ghp_FakeGithub0123456789abcdefghijkl", "FakeGithub0123456789abcdefghijkl"),
    case("github", "pat github_pat_11FAKE0123456789_abcdefghijklmn", "11FAKE0123456789_abcdefghijklmn"),
    case("gitlab", "glpat-FakeGitlab0123456789 expired", "FakeGitlab0123456789"),
    case("hugging face", "login hf_FakeHuggingFace0123456789abcd ok", "FakeHuggingFace0123456789abcd"),
    case("stripe", "restricted rk_live_FakeStripe0123456789 ok", "FakeStripe0123456789"),
    case("stripe", "secret sk_live_FakeStripeSk0123456789 and pk_live_FakeStripePk0123456789", "FakeStripe"),
    case("slack token", "bot xoxb-1234567890-FakeSlackBot0123 joined", "FakeSlackBot0123"),
    case("slack token", "app xapp-1-A0FAKE-0123456789-abcdef ready", "A0FAKE-0123456789"),
    case("slack webhook", "post to https://hooks.slack.com/services/T00FAKE00/B00FAKE00/FakeSlackHook0123456789 now", "FakeSlackHook0123456789"),
    case("discord webhook", "https://discord.com/api/webhooks/123456789012345678/FakeDiscordHook_0123456789", "FakeDiscordHook_0123456789"),
    // As a `net:` fingerprint names them: without the scheme.
    case("slack webhook", "net:hooks.slack.com/services/T00FAKE00/B00FAKE00/FakeSlackNet0123 3/3", "FakeSlackNet0123"),
    case("discord webhook", "net:discord.com/api/webhooks/123456789012345678/FakeDiscordNet_0123 3/3", "FakeDiscordNet_0123"),
    case("aws access key id", "found AKIAFAKEFAKE01234567 in env", "AKIAFAKEFAKE01234567"),
    case("google api key", "maps AIzaFakeGoogle0123456789abcdefghijklmno", "FakeGoogle0123456789abcdefghijklmno"),
    case("npm token", "npm_FakeNpmToken0123456789abcdefghijklmn published", "FakeNpmToken0123456789abcdefghijklmn"),
    case("jwt", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlIn0.FakeJwtSignature0123456789", "FakeJwtSignature0123456789"),
    case("url user info", "git clone https://bob:UrlUserPass55@github.com/o/r", "UrlUserPass55"),
    case("command-line password", "mysql -h db -u root -pMysqlPass66 shop", "MysqlPass66"),
    case("command-line password", "sshpass -p 'SshpassPw77' ssh deploy@host", "SshpassPw77"),
    case("command-line password", "redis-cli -h cache -a RedisPass88 ping", "RedisPass88"),
    case("command-line password", "curl -u admin:CurlUserPw99 https://a.example.com", "CurlUserPw99"),
    case("command-line password", "docker login -u me -p DockerPw0123 registry.example.com", "DockerPw0123"),
    case("command-line password", "docker login -u me --password DockerPwFlag45 ghcr.io", "DockerPwFlag45"),
    case("command-line password", "docker login --username me --password=DockerPwEq67 ghcr.io", "DockerPwEq67"),
    case("command-line password", "podman login -u me -pPodmanPw89 quay.io", "PodmanPw89"),
    case("command-line password", "helm registry login registry.example.com -u me -p HelmPw0123", "HelmPw0123"),
    case("command-line password", "htpasswd -b .htpasswd admin HtpasswdPw01", "HtpasswdPw01"),
    case("command-line password", "sudo htpasswd -bc /etc/nginx/.htpasswd admin HtpasswdPwBc2 && nginx -s reload", "HtpasswdPwBc2"),
    case("command-line password", "htpasswd -Bb -C 12 .htpasswd admin 'Htpasswd Pw Bb3' 2>/dev/null", "Htpasswd Pw Bb3"),
    case("command-line password", "htpasswd -nb admin HtpasswdPwNb4 > users.htpasswd", "HtpasswdPwNb4"),
];

/// Ordinary texts a user needs to read: redaction leaves them unchanged.
pub const ORDINARY_TEXTS: &[&str] = &[
    "ls -la /repo",
    "grep -rn 'token' src/ | head",
    "pytest -k test_password_reset",
    "vim password_reset.py",
    "curl -s https://api.example.com/v1/items?page=2&per_page=100",
    "user: bob",
    "the key point is this",
    "cargo build --release",
    "docker run -p 8080:80 nginx",
    "ssh -p 2222 deploy@host",
    "count the tokens in this file: 12 tokens",
    r#"{"max_tokens": 4096, "token_count": 12, "password_reset": true, "secret": false}"#,
    "PASS: tests/test_auth.py",
    "Basic authentication failed",
    "Bearer authentication is required",
    r#"{"code": "fn main() {}", "key": "user_pref"}"#,
    "gh auth login --token-file /run/secrets/gh",
    "PWD=/home/bob make",
    "mysql -u root -p shop",
    "auth_method: oauth",
    "https://github.com/o/r/blob/main/src/auth.rs",
    "Asia/Tokyo timezone",
    "mail bob@example.com",
    "docker login --password-stdin registry.example.com",
    "docker login -u me registry.example.com",
    "docker run -p 8080:80 -e LOGIN=me nginx",
    "aws configure get region",
    "aws configure set region eu-west-1",
    "npm config set registry https://registry.npmjs.org/",
    "npm config get //registry.npmjs.org/:_authToken",
    "git config --global user.name Bob",
    "htpasswd -v .htpasswd bob",
    "htpasswd -D .htpasswd bob",
    "htpasswd -c .htpasswd bob",
    "a machine learning password manager",
    "the login page password field is empty",
];
