"""The exported graph as a picture, drawn by Google's Model Explorer: ``graph.py`` the
graph JSON and overlay from the program bytes (torch-free), ``page.py`` the page --
Model Explorer's built web app from its installed wheel, made to work offline and
under any folder, with the data files beside it -- and ``serve.py`` that page on
loopback (``exportlens graph --open``, the language server's graph page)."""
