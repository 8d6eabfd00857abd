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
  const password = $os.getenv("TRANSCRIBER_ACCOUNT_PASSWORD");
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
    const env = (k) => $os.getenv("TRANSCRIBER_BACKUPS__" + k);
    const settings = $app.settings();
    settings.backups.cron = env("CRON");
    settings.backups.cronMaxKeep = parseInt(env("KEEP"), 10) || 7;
    const bucket = env("S3_BUCKET");
    settings.backups.s3.enabled = bucket !== "";
    settings.backups.s3.bucket = bucket;
    settings.backups.s3.endpoint = env("S3_ENDPOINT");
    settings.backups.s3.region = env("S3_REGION");
    settings.backups.s3.accessKey = env("S3_ACCESS_KEY");
    settings.backups.s3.forcePathStyle = env("S3_FORCE_PATH_STYLE") === "true";
    if (bucket !== "") settings.backups.s3.secret = $os.getenv("TRANSCRIBER_ACCOUNT_PASSWORD");
    try {
      $app.save(settings);
    } catch (err) {
      console.error("the [backups] settings were refused: " + err);
      $os.exit(2);
    }
    console.log("backups: " + (settings.backups.cron ? "every '" + settings.backups.cron + "', keeping " + settings.backups.cronMaxKeep : "no schedule") + (bucket ? ", to s3://" + bucket : ", to <data_dir>/backups"));
  },
}));
