"""DeerFlow's config.yaml: find it, read its values as DeerFlow does, and migrate it by minimal edit."""
