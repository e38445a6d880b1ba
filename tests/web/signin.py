"""The page signs in with the organisation's identity provider, in headless Chromium: the
authorization code flow with PKCE against the npm `oidc-provider` the test started (its
development login and consent forms), then a chat as the signed-in user, then sign out.
Prints `signed in ok`, `chat ok`, `signed out ok`; any failure raises.

Usage: signin.py BASE_URL USER SCREENSHOT_DIR
"""
import os
import sys

from playwright.sync_api import expect, sync_playwright

from pagekit import launch, open_page, TIMEOUT

BASE, USER, SHOTS = sys.argv[1:4]


def main():
    with sync_playwright() as p:
        browser = launch(p)
        page, errors = open_page(browser)
        page.goto(BASE + "/")
        page.click("#sign-in", timeout=TIMEOUT)
        # The provider's development interactions: a login form, then a consent form.
        page.fill("input[name=login]", USER, timeout=TIMEOUT)
        page.fill("input[name=password]", "any password")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.click("button[type=submit]", timeout=TIMEOUT)
        expect(page.locator("#sign-out")).to_be_visible(timeout=TIMEOUT)
        assert page.url.rstrip("/") == BASE, page.url
        expect(page.locator("#user-field")).to_be_hidden(timeout=TIMEOUT)
        token = page.evaluate("window.agentdSignIn.token()")
        assert token.count(".") == 2, "a JWT access token"
        assert token not in page.content(), "the token is not written into the page"
        print("signed in ok")
        expect(page.locator("#agent option[value=chat]")).to_have_count(1, timeout=TIMEOUT)
        page.fill("#prompt", "hello from the signed-in user")
        page.click("#send")
        answer = page.locator(".message.assistant").last
        expect(answer).to_contain_text("Hi, signed-in user", timeout=TIMEOUT)
        page.screenshot(path=os.path.join(SHOTS, "signed-in.png"))
        print("chat ok")
        page.click("#sign-out")
        page.wait_for_load_state()
        # oidc-provider asks to confirm the sign-out.
        page.click("button[type=submit], button[autofocus]", timeout=TIMEOUT)
        expect(page.locator("#sign-in")).to_be_visible(timeout=TIMEOUT)
        assert page.evaluate("window.agentdSignIn.token()") == ""
        print("signed out ok")
        assert not errors, errors
        browser.close()


if __name__ == "__main__":
    main()
