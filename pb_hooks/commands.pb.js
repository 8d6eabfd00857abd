/// <reference path="../pb_data/types.d.ts" />
// Console commands used by `transcriber` to bootstrap accounts without a
// running server (they work on the data directory directly, like
// `pocketbase superuser upsert`).

$app.rootCmd.addCommand(new Command({
  use: "service-upsert EMAIL PASSWORD",
  short: "Create or update the sidecar's service account",
  run: (cmd, args) => {
    if (args.length !== 2) {
      console.error("usage: service-upsert EMAIL PASSWORD");
      $os.exit(2);
    }
    const col = $app.findCollectionByNameOrId("services");
    let rec;
    try {
      rec = $app.findAuthRecordByEmail("services", args[0]);
    } catch (_) {
      rec = new Record(col);
      rec.setEmail(args[0]);
      rec.set("name", "sidecar");
    }
    if (rec.isNew() || !rec.validatePassword(args[1])) {
      rec.setPassword(args[1]);
    }
    rec.setVerified(true);
    $app.save(rec);
    console.log("service account ready: " + args[0]);
  },
}));

$app.rootCmd.addCommand(new Command({
  use: "user-add EMAIL PASSWORD",
  short: "Create a sender account",
  run: (cmd, args) => {
    if (args.length !== 2) {
      console.error("usage: user-add EMAIL PASSWORD");
      $os.exit(2);
    }
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
    rec.setPassword(args[1]);
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
