"""Rendering results: text for people, and machine formats for CI."""
