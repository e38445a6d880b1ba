"""The console's Schedules tab (SPEC §13) in headless Chromium on a keyless loopback server: it
lists the schedules the Rust test made (agent, prompt, cron and zone, next due time, state), a
schedule opens with its due times, **Run now** fires it (a `fired` row linking its run, which
opens in the Runs tab), **Pause** turns it off; axe finds nothing, and nothing scrolls sideways
on a phone. Prints `schedules ok`; any failure raises.

Usage: schedules.py BASE_URL SCREENSHOT_DIR
"""
import os
import sys

from playwright.sync_api import expect, sync_playwright

from pagekit import axe, launch, open_page, TIMEOUT

BASE, SHOTS = sys.argv[1:3]


def no_sideways_scroll(page, where):
    width = page.evaluate("document.documentElement.scrollWidth")
    viewport = page.viewport_size["width"]
    wider = page.evaluate(
        """() => Array.from(document.querySelectorAll('body *')).filter(e => {
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.right > window.innerWidth + 1 && !e.closest('.table-wrap');
          }).map(e => e.tagName + '#' + e.id + '.' + e.className).slice(0, 8)"""
    )
    assert width <= viewport and not wider, f"{where}: the page is {width} px wide at {viewport} px: {wider}"


def main():
    with sync_playwright() as p:
        browser = launch(p)
        page, errors = open_page(browser)
        page.goto(BASE + "/")
        expect(page.locator("#agent option[value=chat]")).to_have_count(1, timeout=TIMEOUT)
        page.click("#tab-schedules")
        expect(page.locator("#schedules-view")).to_be_visible()
        rows = page.locator("#schedule-table tbody tr")
        expect(rows).to_have_count(2, timeout=TIMEOUT)
        weekly = rows.filter(has_text="Weekly report")
        expect(weekly).to_contain_text("0 9 * * 1 (Europe/Paris)")
        expect(weekly).to_contain_text("on")
        axe(page, "schedules")

        weekly.locator(".open-schedule").click()
        detail = page.locator("#schedule-detail")
        expect(detail).to_be_visible()
        expect(page.locator("#schedule-note")).to_contain_text("not fired yet", timeout=TIMEOUT)
        page.click("#schedule-run-now")
        fired = page.locator("#schedule-runs tbody tr")
        expect(fired).to_have_count(1, timeout=TIMEOUT)
        expect(fired.first).to_contain_text("fired")
        axe(page, "schedule detail")
        page.screenshot(path=os.path.join(SHOTS, "schedules.png"), full_page=True)

        page.click("#schedule-toggle")
        expect(weekly).to_contain_text("paused", timeout=TIMEOUT)
        expect(page.locator("#schedule-toggle")).to_have_text("Resume", timeout=TIMEOUT)

        page.locator("#schedule-runs .open-run").first.click()
        expect(page.locator("#run-detail")).to_be_visible(timeout=TIMEOUT)
        expect(page.locator("#timeline-events")).to_contain_text("Run finished", timeout=TIMEOUT)
        expect(page.locator("#run-result")).to_contain_text("The weekly report is ready.")

        page.set_viewport_size({"width": 390, "height": 844})
        page.click("#tab-schedules")
        expect(rows).to_have_count(2, timeout=TIMEOUT)
        page.screenshot(path=os.path.join(SHOTS, "phone-schedules.png"), full_page=True)
        no_sideways_scroll(page, "phone schedules")
        assert not errors, errors
        browser.close()
    print("schedules ok")


if __name__ == "__main__":
    main()
