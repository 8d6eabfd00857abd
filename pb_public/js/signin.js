// The sign-in screen: what a signed-out sender sees at every address but #/forgot and #/reset/….
import * as api from "./api.js";
import { accountForm, emailField, errorLine, h, sending } from "./dom.js";
import { t } from "./i18n.js";
import { loadOptions, main, refusalWords, route, state } from "./shell.js";

export function renderSignIn() {
  state.view = "signin";
  const notice = state.notice;
  state.notice = "";
  const error = errorLine("signin");
  const submit = h("button", { type: "submit", class: "primary" }, t("signin.submit"));
  // A forgotten password: reset by mail where the owner set mail up, else the owner sets a new one.
  const forgot = h("p", { class: "hint", id: "forgot" });
  const form = accountForm("signin", t("signin.title"), error, [
    h("p", { class: "lead" }, t("signin.lead")),
    notice ? h("p", { class: "notice", role: "status", id: "signin-notice" }, notice) : null,
    emailField("email", t("signin.email")),
    h("label", { for: "password" }, t("signin.password")),
    h("input", { id: "password", name: "password", type: "password", autocomplete: "current-password", required: true }),
    error,
    submit,
    forgot,
  ], async () => {
    const signed = await sending(submit, t("signin.busy"), () => api.signIn(form.email.value.trim(), form.password.value),
      (err) => {
        error.textContent = err.status === 400 ? t("signin.failed") : refusalWords(err, "");
      });
    if (signed) route();
  });
  loadOptions()
    .then((options) => forgot.replaceChildren(
      options.password_reset ? h("a", { href: "#/forgot", id: "forgot-link" }, t("signin.forgot")) : t("signin.askOwner")))
    .catch(() => {});
  main().replaceChildren(form);
}
