// Files of the data directory that no backup holds, and that a restore in
// place (the panel's Settings → Backups → Restore) leaves where they are:
// - service-account.json: the service account's password in plain text
//   (sidecar/pocketbase/process.py SERVICE_FILE). A start on a restored copy
//   that lacks it makes a new password and sets it on the account.
// - transcriber.lock: the running server's hold on the directory
//   (sidecar/pocketbase/lock.py LOCK_FILE).
// tests/unit/test_js_mirrors.py holds this list to the sidecar's names.
const PRIVATE = ["service-account.json", "transcriber.lock"];

module.exports = { PRIVATE: PRIVATE };
