#!/usr/bin/env python3
"""linkcheck.py SITE [EXTERNAL.txt]: every link of a built site resolves.

Reads every .html file under SITE and checks each href and src: a
relative one (or one from the site's root, /x) must name a file of the site (a folder: its index.html), and
its #fragment an id (or a name) in that file; a bare #fragment an id of
the page itself. External links (a scheme such as https: or mailto:) are
not fetched (the check needs no network): they are written, with the
pages that hold them, to EXTERNAL.txt (default SITE/../external-links.txt)
and counted. Exit 1 naming every broken link, else 0.

MkDocs' --strict build already refuses most broken links between
Markdown pages; this also covers what it does not see: links written in
raw HTML, the theme's own links and assets, and the anchors of generated
pages.
"""

import html.parser
import os
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if v is None:
                continue
            if k == "id" or (k == "name" and tag == "a"):
                self.ids.add(v)
            elif (k == "href" and tag in ("a", "link", "area")) or (
                    k == "src" and tag in ("img", "script", "iframe")):
                self.links.append((v, self.getpos()[0]))


def parse(path):
    p = Page()
    with open(path, encoding="utf-8") as f:
        p.feed(f.read())
    return p


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit("usage: linkcheck.py SITE [EXTERNAL.txt]")
    site = os.path.abspath(argv[1])
    ext_path = argv[2] if len(argv) == 3 else os.path.join(
        os.path.dirname(site), "external-links.txt")
    pages = {}
    for root, _, files in os.walk(site):
        for f in files:
            if f.endswith(".html"):
                path = os.path.join(root, f)
                pages[path] = parse(path)
    if not pages:
        print("linkcheck: no .html under %s" % site)
        return 1
    broken, external, checked = [], {}, 0
    for path, page in sorted(pages.items()):
        rel = os.path.relpath(path, site)
        for link, line in page.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or link.startswith("//"):
                external.setdefault(link, set()).add(rel)
                continue
            checked += 1
            target = path
            if url.path:
                # An absolute path is the site's, served at / (the theme's
                # 404 page links so, as it is shown at any address).
                base = site if url.path.startswith("/") else os.path.dirname(path)
                target = os.path.normpath(os.path.join(
                    base, urllib.parse.unquote(url.path).lstrip("/")))
                if not (target + os.sep).startswith(site + os.sep):
                    broken.append("%s:%d: %s: outside the site" % (rel, line, link))
                    continue
                if os.path.isdir(target):
                    target = os.path.join(target, "index.html")
                if not os.path.isfile(target):
                    broken.append("%s:%d: %s: no such file" % (rel, line, link))
                    continue
            if url.fragment:
                if target not in pages:
                    broken.append("%s:%d: %s: an anchor in a file that is not "
                                  "a page" % (rel, line, link))
                elif urllib.parse.unquote(url.fragment) not in pages[target].ids:
                    broken.append("%s:%d: %s: no id \"%s\" in %s" % (
                        rel, line, link, url.fragment,
                        os.path.relpath(target, site)))
    with open(ext_path, "w", encoding="utf-8") as f:
        for link in sorted(external):
            f.write("%s\t%s\n" % (link, " ".join(sorted(external[link]))))
    for b in broken:
        print("linkcheck: broken: " + b)
    print("linkcheck: %d pages, %d internal links checked, %d broken; "
          "%d external links not fetched (listed in %s)" % (
              len(pages), checked, len(broken), len(external), ext_path))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
