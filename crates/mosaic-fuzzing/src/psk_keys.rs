use mosaic_nbd::psk::PskKeys;

/// Fuzz the reader of `serve --tls-psk`'s keys file with any bytes (as
/// text when they are UTF-8, as `PskServer::load` reads them): never
/// panic, and a file it takes has one distinct, non-empty username for
/// each line that is not blank, none over 128 bytes or holding a colon.
pub fn psk_keys(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(keys) = PskKeys::parse(text) else { return };
    let users: Vec<&str> = keys.users().collect();
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(users.len(), lines, "one username a line");
    for (i, u) in users.iter().enumerate() {
        assert!(!u.is_empty() && u.len() <= 128 && !u.contains(':'), "username {u:?}");
        assert!(!users[..i].contains(u), "{u:?} twice");
    }
}
