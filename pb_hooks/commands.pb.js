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
    const done = seeds.settle($app, name, fingerprint, {
      inSync: () => rec !== null && rec.validatePassword(password),
      isDefault: () => rec === null,
      apply: apply,
    });
    if (done.outcome === "apply") seeds.remember($app, name, fingerprint);
    const report = { key: "superuser", email: email, outcome: done.outcome, first: done.first, exists: rec !== null };
    console.log(JSON.stringify({ seeds: [report] }));
  });

// The [backups] keys the settings name, seeded into PocketBase's backup
// settings as lib/seeds.js says: `cron`, `keep`, and `s3` (the S3 keys as one:
// a bucket, its endpoint and its keys only make sense together). The S3
// secret arrives in TRANSCRIBER_ACCOUNT_PASSWORD like the account passwords,
// never on a command line. PocketBase's own cron then makes and prunes them.
$app.rootCmd.addCommand(new Command({
  use: "backups-seed",
  short: "Apply the [backups] keys the settings name (cron, keep, S3) to PocketBase's backup settings, keeping the owner's changes",
  run: () => {
    const ours = require(`${__hooks}/lib/settings.js`);
    const seeds = require(`${__hooks}/lib/seeds.js`);
    const named = seeds.given() || {};
    const env = (k) => ours.get("backups", k);
    const settings = $app.settings();
    const backups = settings.backups;
    const bucket = env("s3_bucket");
    // S3 as one value; off is off, whatever else the fields hold.
    const s3Of = (s) => s.enabled
      ? JSON.stringify([s.bucket, s.endpoint, s.region, s.accessKey, s.secret, s.forcePathStyle])
      : "off";
    const fileS3 = {
      enabled: bucket !== "",
      bucket: bucket,
      endpoint: env("s3_endpoint"),
      region: env("s3_region"),
      accessKey: env("s3_access_key"),
      secret: bucket !== "" ? ours.processValue("accountPassword") : "",
      forcePathStyle: env("s3_force_path_style"),
    };
    const showS3 = (s) => s.enabled ? "s3://" + s.bucket + " at " + s.endpoint : "no S3 (<data_dir>/backups)";
    const keys = {
      cron: {
        inSync: () => backups.cron === env("cron"),
        isDefault: () => backups.cron === "",
        apply: () => { backups.cron = env("cron"); },
        shown: () => backups.cron ? "'" + backups.cron + "'" : "no schedule",
        file: () => env("cron") ? "'" + env("cron") + "'" : "no schedule",
      },
      keep: {
        inSync: () => backups.cronMaxKeep === env("keep"),
        isDefault: () => backups.cronMaxKeep === 3,  // PocketBase's own default
        apply: () => { backups.cronMaxKeep = env("keep"); },
        shown: () => String(backups.cronMaxKeep),
        file: () => String(env("keep")),
      },
      s3: {
        inSync: () => s3Of(backups.s3) === s3Of(fileS3),
        isDefault: () => !backups.s3.enabled,
        apply: () => {
          for (const field of ["enabled", "bucket", "endpoint", "region", "accessKey", "secret", "forcePathStyle"]) {
            backups.s3[field] = fileS3[field];
          }
        },
        shown: () => showS3(backups.s3),
        file: () => showS3(fileS3),
      },
    };
    const report = [];
    for (const name of ["cron", "keep", "s3"]) {
      if (!(name in named)) continue;  // not in the settings: the owner's alone
      const key = keys[name];
      const before = key.shown();
      const done = seeds.settle($app, "backups." + name, named[name], key);
      report.push({ key: name, outcome: done.outcome, first: done.first, panel: before, file: key.file() });
    }
    if (report.some((r) => r.outcome === "apply")) {
      try {
        $app.save(settings);
      } catch (err) {
        console.error("the [backups] settings were refused: " + err);
        $os.exit(2);
      }
      for (const r of report) {
        if (r.outcome === "apply") seeds.remember($app, "backups." + r.key, named[r.key]);
      }
    }
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
