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

function passwordFromEnv() {
  const password = $os.getenv("TRANSCRIBER_ACCOUNT_PASSWORD");
  if (!password) {
    console.error("the password is read from TRANSCRIBER_ACCOUNT_PASSWORD, which is empty");
    $os.exit(2);
  }
  return password;
}

$app.rootCmd.addCommand(new Command({
  use: "service-upsert EMAIL",
  short: "Create or update the sidecar's service account (password from TRANSCRIBER_ACCOUNT_PASSWORD)",
  run: (cmd, args) => {
    if (args.length !== 1) {
      console.error("usage: service-upsert EMAIL");
      $os.exit(2);
    }
    const password = passwordFromEnv();
    upsertAccount("services", args[0], password, (rec) => {
      if (rec.isNew()) rec.set("name", "sidecar");
      rec.setVerified(true);
    });
    console.log("service account ready: " + args[0]);
  },
}));

$app.rootCmd.addCommand(new Command({
  use: "user-add EMAIL",
  short: "Create a sender account (password from TRANSCRIBER_ACCOUNT_PASSWORD)",
  run: (cmd, args) => {
    if (args.length !== 1) {
      console.error("usage: user-add EMAIL");
      $os.exit(2);
    }
    const password = passwordFromEnv();
    let exists = false;
    try {
      $app.findAuthRecordByEmail("users", args[0]);
      exists = true;
    } catch (_) { /* free */ }
    if (exists) {
      console.error("a sender with email " + args[0] + " already exists");
      $os.exit(1);
    }
    const rec = new Record($app.findCollectionByNameOrId("users"));
    rec.setEmail(args[0]);
    rec.setPassword(password);
    rec.setVerified(true);
    try {
      $app.save(rec);
    } catch (err) {
      console.error("cannot create the sender: " + err);
      $os.exit(1);
    }
    console.log("sender created: " + args[0]);
  },
}));

$app.rootCmd.addCommand(new Command({
  use: "owner-upsert EMAIL",
  short: "Create or update the owner's superuser account (password from TRANSCRIBER_ACCOUNT_PASSWORD)",
  run: (cmd, args) => {
    if (args.length !== 1) {
      console.error("usage: owner-upsert EMAIL");
      $os.exit(2);
    }
    const password = passwordFromEnv();
    upsertAccount("_superusers", args[0], password, () => {});
    console.log("superuser ready: " + args[0]);
  },
}));
