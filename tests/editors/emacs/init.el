;;; init.el --- the Emacs editor test's user configuration  -*- lexical-binding: t -*-

;; What docs/editors.md tells an eglot user to write: the project's interpreter
;; with -P, exportlens' initialization options, and eglot in every Python buffer.
;; Debian's elpa-eglot (1.9 on Emacs 28) is activated by the site start files.

(require 'eglot)

(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs
               `((python-mode python-ts-mode)
                 . (,(getenv "EXPORTLENS_EMACS_PYTHON") "-P" "-m" "exportlens" "serve"
                    ;; A short debounce keeps the edit quick; the cache folder
                    ;; comes from $EXPORTLENS_CACHE_DIR, which the server inherits.
                    :initializationOptions (:exportlens (:debounceMs 100))))))

(add-hook 'python-mode-hook #'eglot-ensure)

;;; init.el ends here
