#!/usr/bin/env python3
"""Drives the operator console in a real headless Chromium (Debian's chromium and chromedriver, through Selenium) the
way an on-call engineer would, and prints what each page showed as JSON for the test to check (the text, not pixels):

    console-browser-check.py --url http://127.0.0.1:PORT --query g1 --query GPA.g1 --query u1 \
        --dead-lettered dl4 --screenshots DIR

Steps: the overview (and whether the page's Content-Security-Policy blocks an inline script and an outside image put
into it), one search per --query typed into the search box, the dead-letter list, the timeline of --dead-lettered opened
from its link there. For every page: its URL, title, visible text, and every resource the browser loaded. Last, the
browser's console log after the probe. Exits 2 when the browser cannot be driven.
"""
import argparse
import json
import os
import sys
import time
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


def observe(driver, name):
    resources = driver.execute_script(
        "return performance.getEntriesByType('resource').map(function (e) { return e.name; })")
    references = driver.execute_script(
        "return Array.from(document.querySelectorAll('[src],[href],[action]')).map(function (e) {"
        " return e.getAttribute('src') || e.getAttribute('href') || e.getAttribute('action'); })")
    return {
        "name": name,
        "url": driver.current_url,
        "title": driver.title,
        "text": driver.find_element(By.TAG_NAME, "body").text,
        "resources": resources,
        "references": references,
    }


def search(driver, query):
    box = driver.find_element(By.CSS_SELECTOR, "form.searchbox input[name=q]")
    box.clear()
    box.send_keys(query)
    driver.find_element(By.CSS_SELECTOR, "form.searchbox button[type=submit]").click()
    # This query's page, loaded (the previous search's URL also holds "q=").
    expected = "q=" + urllib.parse.quote_plus(query)
    wait_for(driver, lambda: driver.current_url.endswith(expected)
             and driver.execute_script("return document.readyState") == "complete")


def wait_for(driver, condition, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if condition():
                return
        except WebDriverException:
            pass
        time.sleep(0.1)
    raise RuntimeError("the page did not change within %d s (at %s)" % (seconds, driver.current_url))


def csp_probe(driver):
    """Puts an inline script and an outside image into the page: under the console's policy neither may run or load."""
    driver.execute_script(
        "window.__violations = [];"
        "document.addEventListener('securitypolicyviolation', function (e) {"
        "  window.__violations.push(e.effectiveDirective || e.violatedDirective); });"
        "var s = document.createElement('script'); s.textContent = 'window.__inlineRan = true;';"
        "document.head.appendChild(s);"
        "var i = document.createElement('img'); i.src = 'https://example.com/tracker.png'; document.body.appendChild(i);")
    time.sleep(1.0)
    return driver.execute_script(
        "return {inlineRan: window.__inlineRan === true, violations: window.__violations}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--query", action="append", default=[])
    parser.add_argument("--dead-lettered", required=True)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--refunding-user", help="a user the refunds page lists: its link is followed")
    arguments = parser.parse_args()
    os.makedirs(arguments.screenshots, exist_ok=True)

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000",
                 "--no-first-run", "--disable-extensions", "--disable-background-networking"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Never let Selenium fetch a browser or a driver of its own.
    os.environ["SE_OFFLINE"] = "true"
    try:
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    except WebDriverException as error:
        print("console-browser-check: cannot start chromium through chromedriver: %s" % error.msg, file=sys.stderr)
        return 2
    report = {"pages": [], "csp": None, "log": []}
    try:
        driver.set_page_load_timeout(30)
        driver.get(arguments.url + "/")
        report["pages"].append(observe(driver, "overview"))
        driver.save_screenshot(os.path.join(arguments.screenshots, "console-overview.png"))
        report["csp"] = csp_probe(driver)
        # The probe's own violations, reported apart: the log checked last is of the pages' own behaviour.
        report["csp"]["log"] = [entry["message"] for entry in driver.get_log("browser")]
        for query in arguments.query:
            search(driver, query)
            report["pages"].append(observe(driver, "search " + query))
        driver.find_element(By.LINK_TEXT, "Dead letters").click()
        wait_for(driver, lambda: "/dead-letters" in driver.current_url
                 and driver.execute_script("return document.readyState") == "complete")
        report["pages"].append(observe(driver, "dead letters"))
        driver.find_element(By.LINK_TEXT, arguments.dead_lettered).click()
        wait_for(driver, lambda: "/purchase" in driver.current_url
                 and driver.execute_script("return document.readyState") == "complete")
        report["pages"].append(observe(driver, "dead-lettered timeline"))
        driver.save_screenshot(os.path.join(arguments.screenshots, "console-timeline.png"))
        if arguments.refunding_user:
            driver.find_element(By.LINK_TEXT, "Refunds").click()
            wait_for(driver, lambda: "/refunds" in driver.current_url
                     and driver.execute_script("return document.readyState") == "complete")
            report["pages"].append(observe(driver, "refunds"))
            driver.save_screenshot(os.path.join(arguments.screenshots, "console-refunds.png"))
            driver.find_element(By.CSS_SELECTOR, "#refund-users").find_element(
                By.LINK_TEXT, arguments.refunding_user).click()
            wait_for(driver, lambda: "/user" in driver.current_url
                     and driver.execute_script("return document.readyState") == "complete")
            report["pages"].append(observe(driver, "refunding user"))
        report["log"] = [{"level": entry["level"], "message": entry["message"]} for entry in driver.get_log("browser")]
    except Exception as error:  # what the test should show: where the walk stopped and why
        report["error"] = "%s: %s (at %s)" % (type(error).__name__, error, driver.current_url)
    finally:
        driver.quit()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
