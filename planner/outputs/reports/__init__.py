"""Reports for people: the plan, what-if and break-even pages (Markdown and self-contained HTML).

Each page module turns its typed document into a template context; the templates are Jinja files in
``templates/`` that extend ``base.html.j2``; ``kit.py`` holds the formatting and tables they share.
"""
