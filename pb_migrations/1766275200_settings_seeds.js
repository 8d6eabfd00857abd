/// <reference path="../pb_data/types.d.ts" />
// What the settings file last applied to PocketBase's own settings (the
// backup schedule and S3, the owner's superuser password), one row a key:
// a start applies a key the file names only when the file's value changed
// since (pb_hooks/lib/seeds.js), so what the owner sets in the panel stays.
// A plain table, not a collection: nothing to show or edit in the panel. It
// lives in data.db, so a restored backup remembers it too. `applied` is the
// sidecar's fingerprint of the value: the value itself where nothing in it is
// secret, an scrypt hash where it is; never a password.
migrate((app) => {
  app.db().newQuery(
    "CREATE TABLE IF NOT EXISTS _transcriber_seeds (" +
    "key TEXT PRIMARY KEY NOT NULL, applied TEXT NOT NULL, updated TEXT NOT NULL DEFAULT '')",
  ).execute();
}, (app) => {
  app.db().newQuery("DROP TABLE IF EXISTS _transcriber_seeds").execute();
});
