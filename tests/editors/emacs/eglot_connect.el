;;; eglot_connect.el --- eglot connected to a running `exportlens serve --tcp'  -*- lexical-binding: t -*-
;;
;; The configuration of docs/editors.md ("Over a socket", eglot), with the port, the
;; token and the model from the environment. Opens the model, waits for its first
;; publishDiagnostics, writes what it got as JSON to $EXPORTLENS_EMACS_RESULT, and
;; shuts the server down (shutdown, exit) as `M-x eglot-shutdown' does.

(require 'eglot)
(require 'python)
(require 'json)

(defvar exportlens-test-published nil "Every publishDiagnostics: (URI CODES).")
(defvar exportlens-test-error nil "Why eglot could not connect, if it could not.")

(let ((port (string-to-number (getenv "EXPORTLENS_EMACS_PORT")))
      (token (getenv "EXPORTLENS_EMACS_TOKEN")))
  ;; As in the docs, with "127.0.0.1" 8765 and (getenv "EXPORTLENS_TOKEN").
  (add-to-list 'eglot-server-programs
               `((python-mode python-ts-mode)
                 . (eglot-lsp-server
                    :process ,(lambda () (open-network-stream "exportlens" nil "127.0.0.1" port))
                    :initializationOptions (:exportlens (:token ,token))))))

(cl-defmethod eglot-handle-notification :before
  (_server (_method (eql textDocument/publishDiagnostics)) &key uri diagnostics &allow-other-keys)
  (push (list uri (mapcar (lambda (d) (plist-get d :code)) diagnostics)) exportlens-test-published))

(find-file (getenv "EXPORTLENS_EMACS_MODEL"))
(python-mode)
(condition-case err
    (apply #'eglot (eglot--guess-contact))
  (error (setq exportlens-test-error (format "%S" err))))
(let ((deadline (+ (float-time) (string-to-number (getenv "EXPORTLENS_EMACS_WAIT_S")))))
  (while (and (not exportlens-test-published) (not exportlens-test-error) (< (float-time) deadline))
    (accept-process-output nil 0.2)))
(with-temp-file (getenv "EXPORTLENS_EMACS_RESULT")
  (insert (json-encode
           `((published . ,(mapcar (lambda (p) `((uri . ,(car p)) (codes . ,(vconcat (cadr p)))))
                                   (reverse exportlens-test-published)))
             (error . ,exportlens-test-error)))))
(when (eglot-current-server)
  (eglot-shutdown (eglot-current-server)))
(kill-emacs 0)
