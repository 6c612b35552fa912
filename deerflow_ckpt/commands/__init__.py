"""One core module per command: a typed request in, a typed result out, as the command line runs it.

The CLI modules (deerflow_ckpt/cli/) only turn options into a request and a result into output
(deerflow_ckpt/report/); what a command does is read here.
"""
