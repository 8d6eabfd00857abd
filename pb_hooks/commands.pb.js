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

$app.rootCmd.addCommand(new Command({
  use: "service-upsert EMAIL",
  short: "Create or update the sidecar's service account (password from TRANSCRIBER_ACCOUNT_PASSWORD)",
  run: (cmd, args) => {
    const account = emailAndPassword("service-upsert EMAIL", args);
    const email = account.email;
    const password = account.password;
    upsertAccount("services", email, password, (rec) => {
      if (rec.isNew()) rec.set("name", "sidecar");
      rec.setVerified(true);
    });
    console.log("service account ready: " + email);
  },
}));

$app.rootCmd.addCommand(new Command({
  use: "user-add EMAIL",
  short: "Create a sender account (password from TRANSCRIBER_ACCOUNT_PASSWORD)",
  run: (cmd, args) => {
    const account = emailAndPassword("user-add EMAIL", args);
    const email = account.email;
    const password = account.password;
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
    try {
      $app.save(rec);
    } catch (err) {
      console.error("cannot create the sender: " + err);
      $os.exit(1);
    }
    console.log("sender created: " + email);
  },
}));

// A sender's new password, set by the owner on the host (a sender who forgot theirs, where no mail is set
// up for the reset). Saving a new password refreshes the account's token key: every session of theirs ends.
$app.rootCmd.addCommand(new Command({
  use: "user-password EMAIL",
  short: "Set a sender's password (from TRANSCRIBER_ACCOUNT_PASSWORD); their sessions end",
  run: (cmd, args) => {
    const account = emailAndPassword("user-password EMAIL", args);
    let rec;
    try {
      rec = $app.findAuthRecordByEmail("users", account.email);
    } catch (_) {
      console.error("no sender with email " + account.email);
      $os.exit(1);
    }
    rec.setPassword(account.password);
    rec.refreshTokenKey();
    try {
      $app.save(rec);
    } catch (err) {
      console.error("the password was refused: " + err);
      $os.exit(1);
    }
    console.log("password set for " + account.email);
  },
}));

$app.rootCmd.addCommand(new Command({
  use: "owner-upsert EMAIL",
  short: "Create or update the owner's superuser account (password from TRANSCRIBER_ACCOUNT_PASSWORD)",
  run: (cmd, args) => {
    const account = emailAndPassword("owner-upsert EMAIL", args);
    const email = account.email;
    const password = account.password;
    upsertAccount("_superusers", email, password, () => {});
    console.log("superuser ready: " + email);
  },
}));

// The backup schedule and where backups go, from the sidecar's [backups]
// settings (run at every start; the S3 secret arrives in
// TRANSCRIBER_ACCOUNT_PASSWORD like the account passwords, never on a
// command line). PocketBase's own cron then makes and prunes them.
$app.rootCmd.addCommand(new Command({
  use: "backups-configure",
  short: "Apply [backups] (cron, keep, S3) to PocketBase's backup settings",
  run: () => {
    const ours = require(`${__hooks}/lib/settings.js`);
    const env = (k) => ours.get("backups", k);
    const settings = $app.settings();
    settings.backups.cron = env("cron");
    settings.backups.cronMaxKeep = env("keep");
    const bucket = env("s3_bucket");
    settings.backups.s3.enabled = bucket !== "";
    settings.backups.s3.bucket = bucket;
    settings.backups.s3.endpoint = env("s3_endpoint");
    settings.backups.s3.region = env("s3_region");
    settings.backups.s3.accessKey = env("s3_access_key");
    settings.backups.s3.forcePathStyle = env("s3_force_path_style");
    if (bucket !== "") settings.backups.s3.secret = ours.processValue("accountPassword");
    try {
      $app.save(settings);
    } catch (err) {
      console.error("the [backups] settings were refused: " + err);
      $os.exit(2);
    }
    console.log("backups: " + (settings.backups.cron ? "every '" + settings.backups.cron + "', keeping " + settings.backups.cronMaxKeep : "no schedule") + (bucket ? ", to s3://" + bucket : ", to <data_dir>/backups"));
  },
}));

// Erases one sender's data on request: every recording of theirs with its
// files (originals, normalized pieces, raw results), transcripts, journal and
// attempts, insights, their topics, and (unless --keep-account) the account; then one
// audit row. Recordings are otherwise never deleted (ST5): this command is the
// one way, run by the owner on the host (`transcriber sender erase`, which
// removes the provider-side copies first and asks for confirmation). Raw SQL
// in one transaction: the model hooks refuse deletes on purpose.
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
    let user;
    try {
      user = $app.findAuthRecordByEmail("users", email);
    } catch (_) {
      console.error("no sender with email " + email);
      $os.exit(1);
    }
    const ids = arrayOf(new DynamicModel({ id: "" }));
    $app.db().newQuery("SELECT id FROM audio_records WHERE owner = {:owner}").bind({ owner: user.id }).all(ids);
    const recordIds = ids.map((r) => r.id);
    const fsys = $app.newFilesystem();
    let files = 0;
    let bytes = 0;
    const dirs = [];
    try {
      for (const collection of ["files", "recognition_attempts"]) {
        const col = $app.findCollectionByNameOrId(collection);
        const rows = arrayOf(new DynamicModel({ id: "", blob: "", size: 0 }));
        const blobField = collection === "files" ? "blob" : "raw_response";
        const sizeExpr = collection === "files" ? "size" : "0";
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
      $app.runInTransaction((tx) => {
        for (const rid of recordIds) {
          for (const table of ["record_events", "texts", "files", "recognition_attempts", "insights"]) {
            tx.db().newQuery("DELETE FROM " + table + " WHERE record = {:r}").bind({ r: rid }).execute();
          }
          tx.db().newQuery("DELETE FROM record_status WHERE id = {:r}").bind({ r: rid }).execute();
          tx.db().newQuery("DELETE FROM audio_records WHERE id = {:r}").bind({ r: rid }).execute();
        }
        tx.db().newQuery("DELETE FROM record_status WHERE owner = {:o}").bind({ o: user.id }).execute();
        tx.db().newQuery("DELETE FROM topics WHERE owner = {:o}").bind({ o: user.id }).execute();
        if (!keepAccount) tx.db().newQuery("DELETE FROM users WHERE id = {:o}").bind({ o: user.id }).execute();
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
