;;; probe.el --- what the Emacs editor test reads, loaded after init.el  -*- lexical-binding: t -*-

;; Not part of any user configuration: it lets the test see what Emacs holds. A
;; timer writes, whenever it changed, the state below as JSON to
;; $EXPORTLENS_EMACS_STATE (a temporary file renamed into place), then sets the
;; terminal's title to "exportlens-probe N": the event the test waits on.
;;
;; State: each Python buffer's text, modified flag and Flymake diagnostics from
;; eglot (line, code, the message as the server sent it); the documentation eldoc
;; shows (the visible text of its buffer: markdown-mode hides markup by making it
;; invisible); the *Messages* buffer; what eglot asked for as hover formats.

(require 'cl-lib)
(require 'eldoc)

(defvar exportlens-probe--last nil "The last state written, as JSON.")
(defvar exportlens-probe--seq 0)

(defun exportlens-probe--visible (buffer)
  (with-current-buffer buffer
    (let (out)
      (save-excursion
        (goto-char (point-min))
        (while (not (eobp))
          (unless (invisible-p (point))
            (push (char-after) out))
          (forward-char 1)))
      (concat (nreverse out)))))

(defun exportlens-probe--diagnostics ()
  (vconcat
   (cl-loop for d in (and (bound-and-true-p flymake-mode) (flymake-diagnostics))
            for lsp = (cdr (assoc 'eglot-lsp-diag (flymake-diagnostic-data d)))
            when lsp
            collect (list :line (line-number-at-pos (flymake-diagnostic-beg d))
                          :code (or (plist-get lsp :code) :null)
                          :message (or (plist-get lsp :message) "")))))

(defun exportlens-probe--buffers ()
  (let (out)
    (dolist (buffer (buffer-list))
      (let ((file (buffer-file-name buffer)))
        (when (and file (string-suffix-p ".py" file))
          (with-current-buffer buffer
            (push (list :name (file-name-nondirectory file)
                        :text (buffer-substring-no-properties (point-min) (point-max))
                        :modified (if (buffer-modified-p) t :false)
                        :managed (if (and (fboundp 'eglot-managed-p) (eglot-managed-p)) t :false)
                        :diagnostics (exportlens-probe--diagnostics))
                  out)))))
    (vconcat out)))

(defun exportlens-probe--formats ()
  (let ((server (ignore-errors (cl-some (lambda (b) (with-current-buffer b (eglot-current-server))) (buffer-list)))))
    (if server
        (plist-get (plist-get (plist-get (eglot-client-capabilities server) :textDocument) :hover) :contentFormat)
      [])))

(defun exportlens-probe--state ()
  (list :buffers (exportlens-probe--buffers)
        :current (buffer-name (window-buffer (selected-window)))
        :line (with-current-buffer (window-buffer (selected-window)) (line-number-at-pos))
        :doc (if (buffer-live-p eldoc--doc-buffer) (exportlens-probe--visible eldoc--doc-buffer) "")
        :messages (with-current-buffer (messages-buffer) (buffer-substring-no-properties (point-min) (point-max)))
        :hover_formats (exportlens-probe--formats)))

(defun exportlens-probe--tick ()
  (condition-case err
      (let ((json (json-serialize (exportlens-probe--state))))
        (unless (equal json exportlens-probe--last)
          (setq exportlens-probe--last json)
          (setq exportlens-probe--seq (1+ exportlens-probe--seq))
          (let* ((file (getenv "EXPORTLENS_EMACS_STATE"))
                 (temp (concat file ".tmp")))
            (let ((coding-system-for-write 'utf-8-unix))
              (write-region (format "{\"seq\":%d,\"state\":%s}" exportlens-probe--seq json) nil temp nil 'silent))
            (rename-file temp file t))
          (send-string-to-terminal (format "\e]2;exportlens-probe %d\a" exportlens-probe--seq))))
    (error (setq exportlens-probe--last nil)
           (message "exportlens-probe: %S" err))))

(run-with-timer 0.2 0.2 #'exportlens-probe--tick)

;;; probe.el ends here
