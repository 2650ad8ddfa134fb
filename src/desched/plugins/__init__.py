"""The plugins, one module each; `catalog` lists them."""
