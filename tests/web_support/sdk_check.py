"""Runs a provider's official Python SDK against a fake of its API.

Usage: sdk_check.py PROVIDER BASE_URL API_KEY QUERY URL...
Prints {"search": [{"title", "url", "description"}], "extract": [{"url", "content"}]}.
Any SDK error (a request the fake rejects, a response the SDK cannot parse) exits
non-zero with the error on stderr.
"""
import json
import sys

provider, base, key, query, urls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
search, extract = [], []

if provider == "tavily":
    from tavily import TavilyClient

    client = TavilyClient(api_key=key, api_base_url=base)
    found = client.search(query, max_results=3)
    search = [{"title": r["title"], "url": r["url"], "description": r["content"]} for r in found["results"]]
    pages = client.extract(urls=urls)
    extract = [{"url": r["url"], "content": r["raw_content"]} for r in pages["results"]]
elif provider == "exa":
    from exa_py import Exa

    client = Exa(api_key=key, base_url=base)
    found = client.search(query, num_results=3, contents={"highlights": True})
    search = [{"title": r.title, "url": r.url, "description": " ".join(r.highlights or [])} for r in found.results]
    pages = client.get_contents(urls, text=True)
    extract = [{"url": r.url, "content": r.text} for r in pages.results]
elif provider == "firecrawl":
    from firecrawl import Firecrawl

    client = Firecrawl(api_key=key, api_url=base)
    found = client.search(query=query, limit=3)
    search = [{"title": r.title, "url": r.url, "description": r.description} for r in (found.web or [])]
    for url in urls:
        doc = client.scrape(url, formats=["markdown"])
        extract.append({"url": doc.metadata.source_url, "content": doc.markdown})
elif provider == "parallel":
    from parallel import Parallel

    client = Parallel(api_key=key, base_url=base)
    found = client.beta.search(objective=query, search_queries=[query], mode="agentic", max_results=3)
    search = [{"title": r.title, "url": r.url, "description": " ".join(r.excerpts or [])} for r in found.results]
    pages = client.beta.extract(urls=urls, full_content=True)
    extract = [{"url": r.url, "content": r.full_content} for r in pages.results]
else:
    sys.exit(f"unknown provider {provider}")

print(json.dumps({"search": search, "extract": extract}))
