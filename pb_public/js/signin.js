// The sign-in screen: what a signed-out sender sees at every address but #/forgot and #/reset/….
import * as api from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";
import { loadOptions, main, refusalWords, route, state } from "./shell.js";

export function renderSignIn() {
  state.view = "signin";
  const notice = state.notice;
  state.notice = "";
  const error = h("p", { class: "error", role: "alert", id: "signin-error" });
  const submit = h("button", { type: "submit", class: "primary" }, t("signin.submit"));
  // A forgotten password: reset by mail where the owner set mail up, else the owner sets a new one.
  const forgot = h("p", { class: "hint", id: "forgot" });
  const form = h(
    "form",
    { class: "card narrow", "aria-labelledby": "signin-title", novalidate: false },
    h("h1", { id: "signin-title" }, t("signin.title")),
    h("p", { class: "lead" }, t("signin.lead")),
    notice ? h("p", { class: "notice", role: "status", id: "signin-notice" }, notice) : null,
    h("label", { for: "email" }, t("signin.email")),
    h("input", { id: "email", name: "email", type: "email", autocomplete: "username", required: true }),
    h("label", { for: "password" }, t("signin.password")),
    h("input", { id: "password", name: "password", type: "password", autocomplete: "current-password", required: true }),
    error,
    submit,
    forgot,
  );
  loadOptions()
    .then((options) => forgot.replaceChildren(
      options.password_reset ? h("a", { href: "#/forgot", id: "forgot-link" }, t("signin.forgot")) : t("signin.askOwner")))
    .catch(() => {});
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    submit.disabled = true;
    submit.textContent = t("signin.busy");
    try {
      await api.signIn(form.email.value.trim(), form.password.value);
      route();
    } catch (err) {
      error.textContent = err.status === 400 ? t("signin.failed") : refusalWords(err, "");
      submit.disabled = false;
      submit.textContent = t("signin.submit");
    }
  });
  main().replaceChildren(form);
}
