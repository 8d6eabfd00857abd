/// <reference path="../pb_data/types.d.ts" />
// Console commands used by `transcriber` to bootstrap accounts without a
// running server (they work on the data directory directly, like
// `pocketbase superuser upsert`). The password comes from the environment
// (TRANSCRIBER_ACCOUNT_PASSWORD), never from the command line: anyone on the
// host can read command lines in `ps`.

// The account with this email in `collection`, created if missing (`init` sets
// what a new one needs), its password set unless it already is that password.
function upsertAccount(collection, email, password, init) {
  let rec;
  try {
    rec = $app.findAuthRecordByEmail(collection, email);
  } catch (_) {
    rec = new Record($app.findCollectionByNameOrId(collection));
    rec.setEmail(email);
  }
  init(rec);
  if (rec.isNew() || !rec.validatePassword(password)) {
    rec.setPassword(password);
  }
  $app.save(rec);
}

// The account commands' one argument (EMAIL) and the password from the environment; exits 2 without them.
function emailAndPassword(use, args) {
  if (args.length !== 1) {
    console.error("usage: " + use);
    $os.exit(2);
  }
  const password = require(`${__hooks}/lib/settings.js`).processValue("accountPassword");
  if (!password) {
    console.error("the password is read from TRANSCRIBER_ACCOUNT_PASSWORD, which is empty");
    $os.exit(2);
  }
  return { email: args[0], password: password };
}

// A command on one account, `NAME EMAIL`, its password from the environment: `run(email, password)`.
function accountCommand(name, short, run) {
  $app.rootCmd.addCommand(new Command({
    use: name + " EMAIL",
    short: short,
    run: (cmd, args) => {
      const account = emailAndPassword(name + " EMAIL", args);
      run(account.email, account.password);
    },
  }));
}

// The sender with this email, or exit 1 saying there is none.
function senderOrExit(email) {
  try {
    return $app.findAuthRecordByEmail("users", email);
  } catch (_) {
    console.error("no sender with email " + email);
    $os.exit(1);
  }
}

// Saves `rec`, or exits 1 saying `refused` and why.
function saveOrExit(rec, refused) {
  try {
    $app.save(rec);
  } catch (err) {
    console.error(refused + ": " + err);
    $os.exit(1);
  }
}

// PocketBase encrypts its settings when it saves them with a key (--encryptionEnv), but reads plain ones
// and leaves them so: an install from before the key, or a restored backup of one, is saved again here
// (`transcriber` runs it at every start; a no-op once encrypted).
$app.rootCmd.addCommand(new Command({
  use: "settings-encrypt",
  short: "Save PocketBase's settings again, encrypted with the key its --encryptionEnv names",
  run: (cmd, args) => {
    if (!require(`${__hooks}/lib/settings.js`).processValue("settingsKey")) {
      console.error("no key in PB_ENCRYPTION_KEY: the settings stay as they are");
      $os.exit(2);
    }
    const rows = arrayOf(new DynamicModel({ value: "" }));
    $app.db().newQuery("SELECT value FROM _params WHERE id = 'settings'").all(rows);
    if (rows.length === 0 || String(rows[0].value).trim().charAt(0) !== "{") return;
    $app.save($app.settings());
    // The plain copy's pages, now free, are rewritten away: nothing of it stays in the file.
    $app.db().newQuery("PRAGMA wal_checkpoint(TRUNCATE)").execute();
    $app.db().newQuery("VACUUM").execute();
    $app.db().newQuery("PRAGMA wal_checkpoint(TRUNCATE)").execute();
    console.log("PocketBase's settings are now stored encrypted");
  },
}));

// The owner lets an account in again (`transcriber user unlock`): a row of login_unlocks, which the running
// server applies within a minute (its counts live in its memory, not here).
$app.rootCmd.addCommand(new Command({
  use: "login-unlock COLLECTION EMAIL",
  short: "Let an account in again: forget its wrong passwords' counts (users or _superusers)",
  run: (cmd, args) => {
    if (args.length !== 2 || ["users", "_superusers"].indexOf(args[0]) < 0) {
      console.error("usage: login-unlock users|_superusers EMAIL");
      $os.exit(2);
    }
    try {
      $app.findAuthRecordByEmail(args[0], args[1]);
    } catch (_) {
      console.error("no account of " + args[0] + " with email " + args[1]);
      $os.exit(1);
    }
    const row = new Record($app.findCollectionByNameOrId("login_unlocks"));
    row.set("collection", args[0]);
    row.set("identity", args[1]);
    saveOrExit(row, "the unlock was refused");
    console.log("unlock of " + args[1] + " written; the running server applies it within a minute");
  },
}));

accountCommand("service-upsert", "Create or update the sidecar's service account (password from TRANSCRIBER_ACCOUNT_PASSWORD)",
  (email, password) => {
    upsertAccount("services", email, password, (rec) => {
      if (rec.isNew()) rec.set("name", "sidecar");
      rec.setVerified(true);
    });
    console.log("service account ready: " + email);
  });

accountCommand("user-add", "Create a sender account (password from TRANSCRIBER_ACCOUNT_PASSWORD)", (email, password) => {
  let exists = false;
  try {
    $app.findAuthRecordByEmail("users", email);
    exists = true;
  } catch (_) { /* free */ }
  if (exists) {
    console.error("a sender with email " + email + " already exists");
    $os.exit(1);
  }
  const rec = new Record($app.findCollectionByNameOrId("users"));
  rec.setEmail(email);
  rec.setPassword(password);
  rec.setVerified(true);
  saveOrExit(rec, "cannot create the sender");
  console.log("sender created: " + email);
});

// A sender's new password, set by the owner on the host (a sender who forgot theirs, where no mail is set
// up for the reset). Saving a new password refreshes the account's token key: every session of theirs ends.
accountCommand("user-password", "Set a sender's password (from TRANSCRIBER_ACCOUNT_PASSWORD); their sessions end",
  (email, password) => {
    const rec = senderOrExit(email);
    rec.setPassword(password);
    rec.refreshTokenKey();
    saveOrExit(rec, "the password was refused");
    console.log("password set for " + email);
  });

// The owner's superuser account from [pocketbase] superuser_email and
// superuser_password (password from TRANSCRIBER_ACCOUNT_PASSWORD), seeded as
// lib/seeds.js says: created when missing, its password set only when the
// file's changed since it was last applied, so a password the owner changed
// in the panel stays. Run by hand (no fingerprint), it sets the password.
accountCommand("owner-upsert",
  "Create the owner's superuser account, or set its password where the settings changed it (password from TRANSCRIBER_ACCOUNT_PASSWORD)",
  (email, password) => {
    const seeds = require(`${__hooks}/lib/seeds.js`);
    const name = "superuser:" + email.toLowerCase();
    const fingerprint = (seeds.given() || {})[name];
    let rec = null;
    try {
      rec = $app.findAuthRecordByEmail("_superusers", email);
    } catch (_) { /* none yet */ }
    const apply = () => upsertAccount("_superusers", email, password, () => {});
    if (!fingerprint) {
      apply();
      console.log("superuser ready: " + email);
      return;
    }
    // The account's token key once the settings' password was set (a password change renews it): another
    // one since is the owner's change in the panel, and a new settings' password replacing it is said at WARNING.
    const hashMark = (r) => $security.sha256(r.tokenKey());
    const lastMark = seeds.recall($app, name + "#panel");
    const done = seeds.settle($app, name, fingerprint, {
      inSync: () => rec !== null && rec.validatePassword(password),
      isDefault: () => rec === null,
      apply: apply,
    });
    const overrides = done.outcome === "apply" && rec !== null && (lastMark === null || lastMark !== hashMark(rec));
    if (done.outcome === "apply") {
      seeds.remember($app, name, fingerprint);
      seeds.remember($app, name + "#panel", hashMark($app.findAuthRecordByEmail("_superusers", email)));
    }
    const report = { key: "superuser", email: email, outcome: done.outcome, first: done.first, exists: rec !== null,
      overrides: overrides };
    console.log(JSON.stringify({ seeds: [report] }));
  });

// The [backups] keys the settings name, seeded into PocketBase's backup
// settings as lib/seeds.js says: `cron`, `keep`, and each S3 key on its own (a
// file naming some S3 keys changes only those: naming the region does not turn
// off the S3 the owner set up in the panel; naming `s3_bucket` turns S3 on, or
// off when it is empty). The S3 secret arrives in TRANSCRIBER_ACCOUNT_PASSWORD
// like the account passwords, never on a command line. PocketBase's own cron
// then makes and prunes them.
//
// A file's new value that replaces one the owner set in the panel (not the
// file's last applied one) is reported as `overrides`, which the start logs at
// WARNING with the key's name. What PocketBase held once the file's value was
// applied is remembered as a mark keyed with the settings key (no backup holds
// it), so the S3 secret's mark says nothing of the secret.
$app.rootCmd.addCommand(new Command({
  use: "backups-seed",
  short: "Apply the [backups] keys the settings name (cron, keep, each S3 key) to PocketBase's backup settings, keeping the owner's changes",
  run: () => {
    const ours = require(`${__hooks}/lib/settings.js`);
    const seeds = require(`${__hooks}/lib/seeds.js`);
    const named = seeds.given() || {};
    const env = (k) => ours.get("backups", k);
    const settings = $app.settings();
    const backups = settings.backups;
    const s3 = backups.s3;
    const key = ours.processValue("settingsKey");
    const mark = (name, value) => key ? $security.hs256(name + "|" + JSON.stringify(value), key)
      : $security.sha256(name + "|" + JSON.stringify(value));
    const quoted = (v) => v ? "'" + v + "'" : "none";
    const hidden = (v) => v ? "one" : "none";  // a secret is never shown
    // One S3 field: its value in PocketBase, the file's, how it is shown.
    const field = (name, show, isUnset) => ({
      current: () => s3[name],
      file: () => name === "secret" ? ours.processValue("accountPassword") : env({
        endpoint: "s3_endpoint", region: "s3_region", accessKey: "s3_access_key", forcePathStyle: "s3_force_path_style",
      }[name]),
      isDefault: () => isUnset(s3[name]),
      apply: (v) => { s3[name] = v; },
      show: show,
    });
    const keys = {
      cron: {
        current: () => backups.cron, file: () => env("cron"), isDefault: () => backups.cron === "",
        apply: (v) => { backups.cron = v; }, show: (v) => v ? "'" + v + "'" : "no schedule",
      },
      keep: {
        current: () => backups.cronMaxKeep, file: () => env("keep"),
        isDefault: () => backups.cronMaxKeep === 3,  // PocketBase's own default
        apply: (v) => { backups.cronMaxKeep = v; }, show: (v) => String(v),
      },
      s3_bucket: {
        current: () => s3.enabled ? s3.bucket : "", file: () => env("s3_bucket"), isDefault: () => !s3.enabled,
        apply: (v) => { s3.bucket = v; s3.enabled = v !== ""; },
        show: (v) => v ? "s3://" + v : "no S3 (<data_dir>/backups)",
      },
      s3_endpoint: field("endpoint", quoted, (v) => v === ""),
      s3_region: field("region", quoted, (v) => v === ""),
      s3_access_key: field("accessKey", hidden, (v) => v === ""),
      s3_secret: field("secret", hidden, (v) => v === ""),
      s3_force_path_style: field("forcePathStyle", (v) => String(v), (v) => v === false),
    };
    const report = [];
    for (const name of Object.keys(keys)) {
      if (!(name in named)) continue;  // not in the settings: the owner's alone
      const k = keys[name];
      const before = k.current();
      const fileValue = k.file();
      const lastMark = seeds.recall($app, "backups." + name + "#panel");
      const wasDefault = k.isDefault();
      const done = seeds.settle($app, "backups." + name, named[name], {
        inSync: () => before === fileValue,
        isDefault: () => wasDefault,
        apply: () => k.apply(fileValue),
      });
      // Replacing the owner's: the value is not what the file last applied (or, never applied, not the default).
      const overrides = done.outcome === "apply" &&
        (lastMark === null ? !wasDefault : lastMark !== mark(name, before));
      report.push({ key: name, outcome: done.outcome, first: done.first, overrides: overrides,
        panel: k.show(before), file: k.show(fileValue), mark: mark(name, fileValue) });
    }
    if (report.some((r) => r.outcome === "apply")) {
      try {
        $app.save(settings);
      } catch (err) {
        console.error("the [backups] settings were refused: " + err);
        $os.exit(2);
      }
      for (const r of report) {
        if (r.outcome !== "apply") continue;
        seeds.remember($app, "backups." + r.key, named[r.key]);
        seeds.remember($app, "backups." + r.key + "#panel", r.mark);
      }
    }
    for (const r of report) delete r.mark;
    console.log(JSON.stringify({ seeds: report }));
  },
}));

// Erases one sender's data on request: every recording of theirs with its
// files (originals, normalized pieces, raw results), transcripts, journal and
// attempts, insights, their topics, and (unless --keep-account) the account
// with its avatar and PocketBase's own rows about its sign-ins; then one
// audit row. Recordings are otherwise never deleted (ST5): this command is the
// one way, run by the owner on the host (`transcriber user erase`, which
// removes the provider-side copies first and asks for confirmation). Raw SQL
// in one transaction: the model hooks refuse deletes on purpose. With SQLite's
// secure_delete the freed pages are zeroed, so the erased rows are not left
// in the database file for a later backup to carry. It also runs on the
// unpacked copy of an older backup (`--prune-backups`), whose schema may
// predate some of these tables: a table it lacks holds nothing to erase.
$app.rootCmd.addCommand(new Command({
  use: "sender-erase EMAIL BY [--keep-account]",
  short: "Erase one sender's recordings, files, transcripts and journal (and account), with an audit row",
  run: (cmd, args) => {
    if (args.length < 2) {
      console.error("usage: sender-erase EMAIL BY [--keep-account]");
      $os.exit(2);
    }
    const email = args[0];
    const keepAccount = args.indexOf("--keep-account") >= 0;
    const user = senderOrExit(email);
    // Looked up before the transaction: inside it, only `tx` may touch the database.
    const present = {};
    for (const table of ["record_events", "texts", "insights", "literary", "record_status", "topics", "erasures",
      "_authOrigins", "_externalAuths", "_mfas", "_otps"]) present[table] = $app.hasTable(table);
    const has = (table) => present[table] !== false;
    const ids = arrayOf(new DynamicModel({ id: "" }));
    $app.db().newQuery("SELECT id FROM audio_records WHERE owner = {:owner}").bind({ owner: user.id }).all(ids);
    const recordIds = ids.map((r) => r.id);
    const fsys = $app.newFilesystem();
    let files = 0;
    let bytes = 0;
    const dirs = [];
    try {
      // Each collection with files of a recording: its file field, and its size column ("0": none).
      const blobs = { files: ["blob", "size"], recognition_attempts: ["raw_response", "0"], texts: ["document", "0"] };
      for (const collection of ["files", "recognition_attempts", "texts"]) {
        const col = $app.findCollectionByNameOrId(collection);
        if (!col.fields.getByName(blobs[collection][0])) continue;  // an older schema: none there
        const rows = arrayOf(new DynamicModel({ id: "", blob: "", size: 0 }));
        const blobField = blobs[collection][0];
        const sizeExpr = blobs[collection][1];
        for (const rid of recordIds) {
          $app.db().newQuery("SELECT id, " + blobField + " AS blob, " + sizeExpr + " AS size FROM " + collection + " WHERE record = {:r}")
            .bind({ r: rid }).all(rows);
          for (const row of rows) {
            if (row.blob) {
              files++;
              bytes += row.size;
            }
            dirs.push(col.id + "/" + row.id);
          }
        }
      }
      if (!keepAccount) dirs.push(user.collection().id + "/" + user.id);  // an avatar the owner set
      $app.runInTransaction((tx) => {
        tx.db().newQuery("PRAGMA secure_delete = ON").execute();
        const byRecord = ["record_events", "texts", "files", "recognition_attempts", "insights", "literary"].filter(has);
        for (const rid of recordIds) {
          for (const table of byRecord) {
            tx.db().newQuery("DELETE FROM " + table + " WHERE record = {:r}").bind({ r: rid }).execute();
          }
          if (has("record_status")) tx.db().newQuery("DELETE FROM record_status WHERE id = {:r}").bind({ r: rid }).execute();
          tx.db().newQuery("DELETE FROM audio_records WHERE id = {:r}").bind({ r: rid }).execute();
        }
        for (const table of ["record_status", "topics"].filter(has)) {
          tx.db().newQuery("DELETE FROM " + table + " WHERE owner = {:o}").bind({ o: user.id }).execute();
        }
        if (!keepAccount) {
          // PocketBase's rows about the account (sign-in origins, one-time passwords, MFA, OAuth2 links),
          // which its own delete would remove with the record.
          for (const table of ["_authOrigins", "_externalAuths", "_mfas", "_otps"].filter(has)) {
            tx.db().newQuery("DELETE FROM " + table + " WHERE collectionRef = {:c} AND recordRef = {:o}")
              .bind({ c: user.collection().id, o: user.id }).execute();
          }
          tx.db().newQuery("DELETE FROM users WHERE id = {:o}").bind({ o: user.id }).execute();
        }
        if (!has("erasures")) return;
        const audit = new Record(tx.findCollectionByNameOrId("erasures"));
        audit.set("sender_id", user.id);
        audit.set("email_sha256", $security.sha256(email.toLowerCase()));
        audit.set("recordings", recordIds.length);
        audit.set("files", files);
        audit.set("bytes", bytes);
        audit.set("provider_copies", parseInt(require(`${__hooks}/lib/settings.js`).processValue("eraseProviderCopies"), 10) || 0);
        audit.set("account_erased", !keepAccount);
        audit.set("by", args[1]);
        tx.save(audit);
      });
      // The rows are gone; their stored files follow (a failure here leaves only orphaned bytes, no data).
      for (const dir of dirs) fsys.deletePrefix(dir);
    } finally {
      fsys.close();
    }
    console.log(JSON.stringify({ sender_id: user.id, recordings: recordIds.length, files: files, bytes: bytes, account_erased: !keepAccount }));
  },
}));
